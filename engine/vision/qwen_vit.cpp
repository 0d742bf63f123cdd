#include "engine/vision/qwen_vit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tandem::vision::qwen {

std::pair<uint32_t, uint32_t> resized_size(const vision_hparams& hp, uint32_t width, uint32_t height) {
  const int align = static_cast<int>(hp.patch_size * hp.n_merge);
  const auto fa = static_cast<float>(align);
  const auto round_to = [&](float x) { return static_cast<int>(std::round(x / fa)) * align; };
  const auto ceil_to = [&](float x) { return static_cast<int>(std::ceil(x / fa)) * align; };
  const auto floor_to = [&](float x) { return static_cast<int>(std::floor(x / fa)) * align; };
  const int w = static_cast<int>(width), h = static_cast<int>(height);
  int wb = std::max(align, round_to(static_cast<float>(w)));
  int hb = std::max(align, round_to(static_cast<float>(h)));
  const int64_t area = int64_t{wb} * hb;
  if (area > hp.max_pixels) {
    const float beta = std::sqrt(static_cast<float>(h) * static_cast<float>(w) / static_cast<float>(hp.max_pixels));
    hb = std::max(align, floor_to(static_cast<float>(h) / beta));
    wb = std::max(align, floor_to(static_cast<float>(w) / beta));
  } else if (area < hp.min_pixels) {
    const float beta = std::sqrt(static_cast<float>(hp.min_pixels) / (static_cast<float>(h) * static_cast<float>(w)));
    hb = ceil_to(static_cast<float>(h) * beta);
    wb = ceil_to(static_cast<float>(w) * beta);
  }
  return {static_cast<uint32_t>(wb), static_cast<uint32_t>(hb)};
}

window_layout make_layout(const vision_hparams& hp, uint32_t width, uint32_t height) {
  window_layout l;
  const int64_t P = hp.patch_size, m = hp.n_merge;
  if (width % (P * m) || height % (P * m)) throw std::invalid_argument("qwen layout: not a multiple of 2 patches");
  l.gx = width / P;
  l.gy = height / P;
  l.mx = l.gx / m;
  l.my = l.gy / m;
  // windows of win x win merged tokens; with no window layers, one window of the whole image
  const int64_t win = hp.n_wa_pattern > 0 ? std::max<int64_t>(1, hp.window / (P * m)) : std::max(l.mx, l.my);
  const int64_t N = l.gx * l.gy;
  l.patch_y.resize(static_cast<size_t>(N));
  l.patch_x.resize(static_cast<size_t>(N));
  l.place_of_token.resize(static_cast<size_t>(l.mx * l.my));
  l.bounds.push_back(0);
  int64_t place = 0;  // in merged tokens
  for (int64_t wy = 0; wy < l.my; wy += win) {
    for (int64_t wx = 0; wx < l.mx; wx += win) {
      for (int64_t ty = wy; ty < std::min(wy + win, l.my); ++ty) {
        for (int64_t tx = wx; tx < std::min(wx + win, l.mx); ++tx) {
          l.place_of_token[static_cast<size_t>(ty * l.mx + tx)] = static_cast<int32_t>(place);
          for (int64_t s = 0; s < m * m; ++s) {
            l.patch_y[static_cast<size_t>(place * m * m + s)] = static_cast<int32_t>(ty * m + s / m);
            l.patch_x[static_cast<size_t>(place * m * m + s)] = static_cast<int32_t>(tx * m + s % m);
          }
          ++place;
        }
      }
      l.bounds.push_back(place * m * m);
    }
  }
  return l;
}

void rope_2d(float* x, const window_layout& l, int64_t E, int64_t n_head, thread_pool& pool) {
  const int64_t D = E / n_head, half = D / 2, quarter = D / 4;
  // ggml: n_dims = D / 2, theta_scale = base^(-2 / n_dims)
  const float theta_scale = std::pow(10000.0f, -2.0f / static_cast<float>(half));
  pool.parallel_for(static_cast<int64_t>(l.patch_y.size()), [&](int64_t t, int) {
    float cs[512], sn[512];  // [D/2]: the loader bounds D by 1024
    float ty = static_cast<float>(l.patch_y[static_cast<size_t>(t)]), tx = 0.0f;
    for (int64_t j = 0; j < half; ++j) {
      if (j == quarter) tx = static_cast<float>(l.patch_x[static_cast<size_t>(t)]);
      const float theta = j < quarter ? ty : tx;
      cs[j] = std::cos(theta);
      sn[j] = std::sin(theta);
      ty *= theta_scale;
      tx *= theta_scale;
    }
    float* row = x + t * E;
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = row + h * D;
      for (int64_t j = 0; j < half; ++j) {
        const float x0 = v[j], x1 = v[j + half];
        v[j] = x0 * cs[j] - x1 * sn[j];
        v[j + half] = x0 * sn[j] + x1 * cs[j];
      }
    }
  });
}

void window_attention(const float* q, const float* k, const float* v, float* o, int64_t E, int64_t n_head,
                      const std::vector<int64_t>& bounds, thread_pool& pool) {
  const int64_t D = E / n_head, n_win = static_cast<int64_t>(bounds.size()) - 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  pool.parallel_for(n_win * n_head, [&](int64_t task, int) {
    const int64_t w = task / n_head, h = task % n_head, t0 = bounds[static_cast<size_t>(w)],
                  n = bounds[static_cast<size_t>(w) + 1] - t0;
    std::vector<float> kt(static_cast<size_t>(D * n));  // K_h of the window, transposed: [D][n]
    std::vector<float> s(static_cast<size_t>(n));       // one query's scores, then weights: [n]
    std::vector<float> acc(static_cast<size_t>(D));     // one query's output: [D]
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < D; ++d) kt[static_cast<size_t>(d * n + j)] = k[(t0 + j) * E + h * D + d];
    for (int64_t i = 0; i < n; ++i) {
      const float* qi = q + (t0 + i) * E + h * D;
      std::fill(s.begin(), s.end(), 0.0f);
      for (int64_t d = 0; d < D; ++d) {  // sums of broadcasts: vectorizes without reordering a sum
        const float qd = qi[d];
        const float* kd = &kt[static_cast<size_t>(d * n)];
        for (int64_t j = 0; j < n; ++j) s[static_cast<size_t>(j)] += qd * kd[j];
      }
      float most = -INFINITY;
      for (int64_t j = 0; j < n; ++j) most = std::max(most, s[static_cast<size_t>(j)] * scale);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        const float e = std::exp(s[static_cast<size_t>(j)] * scale - most);
        s[static_cast<size_t>(j)] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float pj = s[static_cast<size_t>(j)] * inv;
        const float* vj = v + (t0 + j) * E + h * D;
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += pj * vj[d];
      }
      std::copy(acc.begin(), acc.end(), o + (t0 + i) * E + h * D);
    }
  });
}

}  // namespace tandem::vision::qwen
