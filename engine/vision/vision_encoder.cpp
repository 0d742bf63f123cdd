#include "engine/vision/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/kernels/ops.h"
#include "engine/vision/vision_kernels.h"

namespace tandem::vision {

namespace {

using kernels::weight_view;

// y[n][w.rows] = x[n][w.cols]·wᵀ + bias
void linear(const weight_view& w, const std::vector<float>& bias, const float* x, int64_t n, float* y,
            const kernels::dot_kernels& k, thread_pool& pool, kernels::matmul_scratch& s) {
  float_gemm(w, x, w.cols, n, y, w.rows, k, pool, s);
  pool.parallel_for(n, [&](int64_t t, int) {
    float* row = y + t * w.rows;
    for (int64_t r = 0; r < w.rows; ++r) row[r] += bias[static_cast<size_t>(r)];
  });
}

void layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, int64_t n,
                     int64_t width, float eps, thread_pool& pool) {
  pool.parallel_for(n, [&](int64_t t, int) { kernels::layer_norm(x + t * width, w.data(), b.data(), y + t * width, width, eps); });
}

// O[N][E] (head h at columns h*D) = softmax(Q_h K_hᵀ / √D) V_h, every patch seeing every
// patch, a block of query rows at a time so the score buffer stays bounded. Scores are sums
// of broadcasts against K_h transposed (gemm_bt: the head width is too short for dot
// products), the weighted sum float_gemm's dot products against V_h transposed (N long).
void attention(const vision_hparams& hp, const float* q, const float* k, const float* v, float* o,
               const kernels::dot_kernels& kern, thread_pool& pool, kernels::matmul_scratch& s) {
  const int64_t N = hp.n_patches(), E = hp.n_embd, D = hp.head_dim();
  const int64_t block = std::min<int64_t>(N, 512);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Rows of N floats are laid LD apart, one cache line more than N when N is a multiple of
  // 16: rows a power of two apart (N = 4,096 patches) fall into the same cache sets, and the
  // kernels, which walk down such columns, then missed the caches at every row.
  const int64_t LD = N % 16 == 0 ? N + 16 : N;
  std::vector<float> scores(static_cast<size_t>(block * LD));  // [block][LD]
  std::vector<float> vt(static_cast<size_t>(D * LD));          // V_h transposed: [D][LD]
  std::vector<float> kt(static_cast<size_t>(D * LD));          // K_h transposed: [D][LD]
  for (int64_t h = 0; h < hp.n_head; ++h) {
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t d = 0; d < D; ++d) {
        kt[static_cast<size_t>(d * LD + j)] = k[j * E + h * D + d];
        vt[static_cast<size_t>(d * LD + j)] = v[j * E + h * D + d];
      }
    }
    weight_view vh(tensor_type::f32, N, D, reinterpret_cast<const std::byte*>(vt.data()));
    vh.stride = static_cast<size_t>(LD) * sizeof(float);
    for (int64_t q0 = 0; q0 < N; q0 += block) {
      const int64_t nq = std::min(block, N - q0);
      gemm_bt(q + q0 * E + h * D, E, kt.data(), LD, scores.data(), LD, nq, N, D, pool);  // [nq][N]
      softmax_rows(scores.data(), nq, N, LD, scale, pool);
      float_gemm(vh, scores.data(), LD, nq, o + q0 * E + h * D, E, kern, pool, s);  // [nq][D] into O
    }
  }
}

}  // namespace

image_tiles preprocess_tiles(const projector& p, const rgb_image& img) {
  const vision_hparams& hp = p.hparams();
  image_tiles out;
  if (hp.family == projector_family::gemma3) {
    // libmtmd's fixed-size preprocessing: fitted inside S x S keeping the aspect ratio,
    // padded black, bilinear.
    out.tiles.push_back(normalize_planar(resize_padded(img, hp.image_size, hp.image_size, hp.filter), hp.mean, hp.std));
    return out;
  }
  // idefics3 (libmtmd's, after transformers' Idefics3ImageProcessor): the longer side to
  // longest_edge (the other by the aspect ratio, rounded down, then up to even), then both up
  // to multiples of the tile; the overview is that resized to one tile, the slices its crops.
  const uint32_t S = hp.image_size, L = hp.longest_edge;
  const double aspect = static_cast<double>(img.width) / img.height;
  uint32_t w = L, h = L;
  if (img.width >= img.height) {
    h = std::max<uint32_t>(2, static_cast<uint32_t>(L / aspect));
    h += h % 2;
  } else {
    w = std::max<uint32_t>(2, static_cast<uint32_t>(L * aspect));
    w += w % 2;
  }
  out.grid_x = (w + S - 1) / S;
  out.grid_y = (h + S - 1) / S;
  const rgb_image refined = resize(resize(img, w, h, hp.filter), out.grid_x * S, out.grid_y * S, hp.filter);
  out.tiles.push_back(normalize_planar(resize(refined, S, S, hp.filter), hp.mean, hp.std));
  rgb_image slice{S, S, std::vector<uint8_t>(size_t{S} * S * 3)};
  for (uint32_t gy = 0; gy < out.grid_y; ++gy)
    for (uint32_t gx = 0; gx < out.grid_x; ++gx) {
      for (uint32_t y = 0; y < S; ++y) {
        std::copy_n(&refined.rgb[(size_t{gy * S + y} * refined.width + gx * S) * 3], size_t{S} * 3,
                    &slice.rgb[size_t{y} * S * 3]);
      }
      out.tiles.push_back(normalize_planar(slice, hp.mean, hp.std));
    }
  return out;
}

std::vector<float> preprocess(const projector& p, const rgb_image& img) {
  return std::move(preprocess_tiles(p, img).tiles.front());
}

std::vector<float> encode(const projector& p, const std::vector<float>& pixels, thread_pool& pool,
                          const kernels::dot_kernels& kern) {
  const vision_hparams& hp = p.hparams();
  const int64_t S = hp.image_size, P = hp.patch_size, G = hp.grid(), N = hp.n_patches(), E = hp.n_embd,
                F = hp.n_ff;
  if (pixels.size() != static_cast<size_t>(3 * S * S)) throw std::invalid_argument("vision encode: wrong pixel count");
  kernels::matmul_scratch scratch;

  // X [N][3][P][P]: patch (py, px) of each channel plane.
  std::vector<float> x(static_cast<size_t>(N * 3 * P * P));
  pool.parallel_for(N, [&](int64_t n, int) {
    const int64_t py = n / G, px = n % G;
    float* dst = &x[static_cast<size_t>(n * 3 * P * P)];
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < P; ++y)
        std::copy_n(&pixels[static_cast<size_t>(c * S * S + (py * P + y) * S + px * P)], P, dst + (c * P + y) * P);
  });

  std::vector<float> h(static_cast<size_t>(N * E));  // H [N][E], the residual stream
  linear(p.patch, p.patch_b, x.data(), N, h.data(), kern, pool, scratch);
  for (size_t i = 0; i < h.size(); ++i) h[i] += p.pos[i];
  x = {};

  std::vector<float> a(h.size()), q(h.size()), k(h.size()), v(h.size()), o(h.size());  // [N][E]
  std::vector<float> up(static_cast<size_t>(N * F));                                    // [N][F]
  for (const vit_layer& L : p.layers) {
    layer_norm_rows(h.data(), L.ln1_w, L.ln1_b, a.data(), N, E, hp.eps, pool);
    linear(L.q, L.q_b, a.data(), N, q.data(), kern, pool, scratch);
    linear(L.k, L.k_b, a.data(), N, k.data(), kern, pool, scratch);
    linear(L.v, L.v_b, a.data(), N, v.data(), kern, pool, scratch);
    attention(hp, q.data(), k.data(), v.data(), o.data(), kern, pool, scratch);
    linear(L.out, L.out_b, o.data(), N, a.data(), kern, pool, scratch);
    for (size_t i = 0; i < h.size(); ++i) h[i] += a[i];

    layer_norm_rows(h.data(), L.ln2_w, L.ln2_b, a.data(), N, E, hp.eps, pool);
    linear(L.up, L.up_b, a.data(), N, up.data(), kern, pool, scratch);
    pool.parallel_for(N, [&](int64_t t, int) {
      for (int64_t i = 0; i < F; ++i) up[static_cast<size_t>(t * F + i)] = kernels::gelu_tanh(up[static_cast<size_t>(t * F + i)]);
    });
    linear(L.down, L.down_b, up.data(), N, a.data(), kern, pool, scratch);
    for (size_t i = 0; i < h.size(); ++i) h[i] += a[i];
  }
  if (!p.post_ln_w.empty()) layer_norm_rows(h.data(), p.post_ln_w, p.post_ln_b, h.data(), N, E, hp.eps, pool);

  const int64_t m = hp.n_merge, g = G / m, n_tok = hp.n_tokens();
  std::vector<float> out(static_cast<size_t>(n_tok * hp.n_embd_text));
  if (hp.family == projector_family::idefics3) {
    // T [n_tokens][m][m][E]: token (ty, tx) holds its m x m patches, row by row.
    std::vector<float> t(static_cast<size_t>(n_tok * m * m * E));
    for (int64_t ty = 0; ty < g; ++ty)
      for (int64_t tx = 0; tx < g; ++tx)
        for (int64_t dy = 0; dy < m; ++dy)
          for (int64_t dx = 0; dx < m; ++dx)
            std::copy_n(&h[static_cast<size_t>(((ty * m + dy) * G + tx * m + dx) * E)], E,
                        &t[static_cast<size_t>((((ty * g + tx) * m + dy) * m + dx) * E)]);
    float_gemm(p.proj, t.data(), m * m * E, n_tok, out.data(), hp.n_embd_text, kern, pool, scratch);
    return out;
  }
  // gemma3: T [n_tokens][E], token (ty, tx) the mean of its m x m patches.
  std::vector<float> t(static_cast<size_t>(n_tok * E), 0.0f);
  for (int64_t ty = 0; ty < g; ++ty)
    for (int64_t tx = 0; tx < g; ++tx) {
      float* dst = &t[static_cast<size_t>((ty * g + tx) * E)];
      for (int64_t dy = 0; dy < m; ++dy)
        for (int64_t dx = 0; dx < m; ++dx) {
          const float* src = &h[static_cast<size_t>(((ty * m + dy) * G + tx * m + dx) * E)];
          for (int64_t e = 0; e < E; ++e) dst[e] += src[e];
        }
      for (int64_t e = 0; e < E; ++e) dst[e] /= static_cast<float>(m * m);
    }
  kernels::rms_norm_rows(t.data(), p.soft_norm_w.data(), t.data(), n_tok, E, hp.eps);
  float_gemm(p.proj, t.data(), E, n_tok, out.data(), hp.n_embd_text, kern, pool, scratch);
  return out;
}

}  // namespace tandem::vision
