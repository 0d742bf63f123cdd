#include "engine/vision/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/kernels/ops.h"
#include "engine/vision/qwen_vit.h"
#include "engine/vision/vision_kernels.h"

namespace tandem::vision {

namespace {

using kernels::weight_view;

// y[n][w.rows] = x[n][w.cols]·wᵀ + bias (none where empty); then, where `residual` is given
// ([n][w.rows]), residual += y.
void linear(const weight_view& w, const std::vector<float>& bias, const float* x, int64_t n, float* y,
            const kernels::dot_kernels& k, thread_pool& pool, kernels::matmul_scratch& s, float* residual = nullptr) {
  float_gemm(w, x, w.cols, n, y, w.rows, k, pool, s);
  if (bias.empty() && !residual) return;
  pool.parallel_for(n, [&](int64_t t, int) {
    float* row = y + t * w.rows;
    for (int64_t r = 0; !bias.empty() && r < w.rows; ++r) row[r] += bias[static_cast<size_t>(r)];
    float* sum = residual ? residual + t * w.rows : nullptr;
    for (int64_t r = 0; sum && r < w.rows; ++r) sum[r] += row[r];
  });
}

// The family's norm over rows of `width`: LayerNorm, or RMS norm (x w, + b where b is given).
void norm_rows(const vision_hparams& hp, const float* x, const std::vector<float>& w, const std::vector<float>& b,
               float* y, int64_t n, int64_t width, thread_pool& pool) {
  pool.parallel_for(n, [&](int64_t t, int) {
    if (!hp.rms_norm) return kernels::layer_norm(x + t * width, w.data(), b.data(), y + t * width, width, hp.eps);
    kernels::rms_norm_rows(x + t * width, w.data(), y + t * width, 1, width, hp.eps);
    for (int64_t i = 0; !b.empty() && i < width; ++i) y[t * width + i] += b[static_cast<size_t>(i)];
  });
}

// O[N][E] (head h at columns h*D) = softmax(Q_h K_hᵀ / √D) V_h, every patch seeing every
// patch, a block of query rows at a time so the score buffer stays bounded. Scores are sums
// of broadcasts against K_h transposed (gemm_bt: the head width is too short for dot
// products), the weighted sum float_gemm's dot products against V_h transposed (N long).
void attention(const vision_hparams& hp, int64_t N, const float* q, const float* k, const float* v, float* o,
               const kernels::dot_kernels& kern, thread_pool& pool, kernels::matmul_scratch& s) {
  const int64_t E = hp.n_embd, D = hp.head_dim();
  const int64_t block = std::min<int64_t>(N, 512);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // Rows of N floats are laid LD apart, one cache line more than N when N is a multiple of
  // 16: rows a power of two apart (N = 4,096 patches) fall into the same cache sets, and the
  // kernels, which walk down such columns, then missed the caches at every row.
  const int64_t LD = N % 16 == 0 ? N + 16 : N;
  std::vector<float> scores(static_cast<size_t>(block * LD));  // [block][LD], exp(score - max)
  std::vector<float> sums(static_cast<size_t>(block));          // [block]: each score row's sum
  std::vector<float> vt(static_cast<size_t>(D * LD));          // V_h transposed: [D][LD]
  std::vector<float> kt(static_cast<size_t>(D * LD));          // K_h transposed: [D][LD]
  for (int64_t h = 0; h < hp.n_head; ++h) {
    constexpr int64_t kPatches = 64;  // patches per task
    pool.parallel_for((N + kPatches - 1) / kPatches, [&](int64_t task, int) {
      for (int64_t j = task * kPatches; j < std::min(N, (task + 1) * kPatches); ++j) {
        for (int64_t d = 0; d < D; ++d) {
          kt[static_cast<size_t>(d * LD + j)] = k[j * E + h * D + d];
          vt[static_cast<size_t>(d * LD + j)] = v[j * E + h * D + d];
        }
      }
    });
    weight_view vh(tensor_type::f32, N, D, reinterpret_cast<const std::byte*>(vt.data()));
    vh.stride = static_cast<size_t>(LD) * sizeof(float);
    for (int64_t q0 = 0; q0 < N; q0 += block) {
      const int64_t nq = std::min(block, N - q0);
      gemm_bt(q + q0 * E + h * D, E, kt.data(), LD, scores.data(), LD, nq, N, D, pool);  // [nq][N]
      softmax_rows(scores.data(), nq, N, LD, scale, sums.data(), pool);
      float_gemm(vh, scores.data(), LD, nq, o + q0 * E + h * D, E, kern, pool, s);  // [nq][D] into O
      for (int64_t t = 0; t < nq; ++t) {
        const float inv = 1.0f / sums[static_cast<size_t>(t)];
        for (float* od = o + (q0 + t) * E + h * D; od < o + (q0 + t) * E + (h + 1) * D; ++od) *od *= inv;
      }
    }
  }
}

}  // namespace

image_tiles preprocess_tiles(const projector& p, const rgb_image& img) {
  const vision_hparams& hp = p.hparams();
  image_tiles out;
  const auto tile = [&](const rgb_image& t) {
    return image_tile{normalize_planar(t, hp.mean, hp.std), t.width, t.height};
  };
  if (hp.family == projector_family::gemma3) {
    // libmtmd's fixed-size preprocessing: fitted inside S x S keeping the aspect ratio,
    // padded black, bilinear.
    out.tiles.push_back(tile(resize_padded(img, hp.image_size, hp.image_size, hp.filter)));
    return out;
  }
  if (qwen_family(hp.family)) {
    // libmtmd's dynamic size: the image fitted (bicubic, aspect kept, centred on black) inside
    // the nearest size of whole merged tokens whose area lies within [min, max] pixels.
    const auto [w, h] = qwen::resized_size(hp, img.width, img.height);
    if (uint64_t{w} * h > uint64_t{hp.max_pixels} * 4) {  // only a very thin image gets here
      throw image_error("the image resizes to " + std::to_string(w) + "x" + std::to_string(h) +
                        ", too many patches for the encoder");
    }
    out.tiles.push_back(tile(resize_padded(img, w, h, hp.filter)));
    out.grid_x = w / (hp.patch_size * hp.n_merge);
    out.grid_y = h / (hp.patch_size * hp.n_merge);
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
  out.tiles.push_back(tile(resize(refined, S, S, hp.filter)));
  rgb_image slice{S, S, std::vector<uint8_t>(size_t{S} * S * 3)};
  for (uint32_t gy = 0; gy < out.grid_y; ++gy)
    for (uint32_t gx = 0; gx < out.grid_x; ++gx) {
      for (uint32_t y = 0; y < S; ++y) {
        std::copy_n(&refined.rgb[(size_t{gy * S + y} * refined.width + gx * S) * 3], size_t{S} * 3,
                    &slice.rgb[size_t{y} * S * 3]);
      }
      out.tiles.push_back(tile(slice));
    }
  return out;
}

std::pair<uint32_t, uint32_t> qwen_token_grid(const projector& p, uint32_t width, uint32_t height) {
  const vision_hparams& hp = p.hparams();
  const auto [w, h] = qwen::resized_size(hp, width, height);
  return {w / (hp.patch_size * hp.n_merge), h / (hp.patch_size * hp.n_merge)};
}

std::vector<float> preprocess(const projector& p, const rgb_image& img) {
  return std::move(preprocess_tiles(p, img).tiles.front().pixels);
}

namespace {

// The encoder blocks over H [N][E] in place. `windows`: a Qwen-VL layout (rotary positions,
// window attention on qwen25vl's window layers), or null (SigLIP: learned positions, already
// added).
void run_blocks(const projector& p, std::vector<float>& h, int64_t N, const qwen::window_layout* windows,
                const kernels::dot_kernels& kern, thread_pool& pool, kernels::matmul_scratch& scratch) {
  const vision_hparams& hp = p.hparams();
  const int64_t E = hp.n_embd, F = hp.n_ff;
  std::vector<float> a(h.size()), q(h.size()), k(h.size()), v(h.size()), o(h.size());  // [N][E]
  std::vector<float> up(static_cast<size_t>(N * F));                                    // [N][F]
  std::vector<float> gate(p.layers.front().gate.data ? up.size() : 0);                  // [N][F] (SwiGLU)
  for (size_t il = 0; il < p.layers.size(); ++il) {
    const vit_layer& L = p.layers[il];
    norm_rows(hp, h.data(), L.ln1_w, L.ln1_b, a.data(), N, E, pool);
    linear(L.q, L.q_b, a.data(), N, q.data(), kern, pool, scratch);
    linear(L.k, L.k_b, a.data(), N, k.data(), kern, pool, scratch);
    linear(L.v, L.v_b, a.data(), N, v.data(), kern, pool, scratch);
    if (windows) {
      qwen::rope_2d(q.data(), *windows, E, hp.n_head, pool);
      qwen::rope_2d(k.data(), *windows, E, hp.n_head, pool);
    }
    const bool windowed = windows && hp.n_wa_pattern > 0 && (il + 1) % hp.n_wa_pattern != 0;
    if (windowed) {
      qwen::window_attention(q.data(), k.data(), v.data(), o.data(), E, hp.n_head, windows->bounds, pool);
    } else {
      attention(hp, N, q.data(), k.data(), v.data(), o.data(), kern, pool, scratch);
    }
    linear(L.out, L.out_b, o.data(), N, a.data(), kern, pool, scratch, h.data());  // H += O·outᵀ + b

    norm_rows(hp, h.data(), L.ln2_w, L.ln2_b, a.data(), N, E, pool);
    linear(L.up, L.up_b, a.data(), N, up.data(), kern, pool, scratch);
    if (L.gate.data) {  // SwiGLU: up = SiLU(gate) * up
      linear(L.gate, L.gate_b, a.data(), N, gate.data(), kern, pool, scratch);
      pool.parallel_for(N, [&](int64_t t, int) {
        for (int64_t i = t * F; i < (t + 1) * F; ++i) {
          const float g = gate[static_cast<size_t>(i)];
          up[static_cast<size_t>(i)] *= g / (1.0f + std::exp(-g));
        }
      });
    } else if (hp.quick_gelu) {
      gelu_quick(up.data(), N * F, pool);
    } else {
      gelu(up.data(), N * F, pool);
    }
    linear(L.down, L.down_b, up.data(), N, a.data(), kern, pool, scratch, h.data());  // H += FFN
  }
  if (!p.post_ln_w.empty()) norm_rows(hp, h.data(), p.post_ln_w, p.post_ln_b, h.data(), N, E, pool);
}

// qwen_family: one image of width x height pixels ([3][height][width]) -> [mx*my][n_embd_text],
// the merged tokens in raster order.
std::vector<float> encode_qwen(const projector& p, const std::vector<float>& pixels, uint32_t width, uint32_t height,
                               const kernels::dot_kernels& kern, thread_pool& pool) {
  const vision_hparams& hp = p.hparams();
  const qwen::window_layout l = qwen::make_layout(hp, width, height);
  const int64_t W = width, H = height, P = hp.patch_size, N = l.gx * l.gy, E = hp.n_embd, T = hp.n_embd_text,
                M = hp.merger_width, n_tok = l.mx * l.my;
  if (pixels.size() != static_cast<size_t>(3 * W * H)) throw std::invalid_argument("vision encode: wrong pixel count");
  kernels::matmul_scratch scratch;

  // X [N][3][P][P]: the patch at each place of the window order.
  std::vector<float> x(static_cast<size_t>(N * 3 * P * P));
  pool.parallel_for(N, [&](int64_t n, int) {
    const int64_t py = l.patch_y[static_cast<size_t>(n)], px = l.patch_x[static_cast<size_t>(n)];
    float* dst = &x[static_cast<size_t>(n * 3 * P * P)];
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < P; ++y)
        std::copy_n(&pixels[static_cast<size_t>(c * W * H + (py * P + y) * W + px * P)], P, dst + (c * P + y) * P);
  });
  // H [N][E] = X·patchᵀ + X·patch1ᵀ (the two frames of Qwen's temporal patch, one image twice)
  std::vector<float> h(static_cast<size_t>(N * E)), h1(h.size());
  float_gemm(p.patch, x.data(), 3 * P * P, N, h.data(), E, kern, pool, scratch);
  float_gemm(p.patch1, x.data(), 3 * P * P, N, h1.data(), E, kern, pool, scratch);
  for (size_t i = 0; i < h.size(); ++i) h[i] += h1[i];
  x = {};
  h1 = {};

  run_blocks(p, h, N, &l, kern, pool, scratch);

  // The merger over H as [n_tok][4E] (each merged token's 4 patches are adjacent rows):
  // Y1 = GELU(H·mm0ᵀ + b) [n_tok][M]; Y2 = Y1·mm2ᵀ + b [n_tok][T], in window order.
  std::vector<float> y1(static_cast<size_t>(n_tok * M)), y2(static_cast<size_t>(n_tok * T));
  linear(p.proj, p.proj_b, h.data(), n_tok, y1.data(), kern, pool, scratch);
  gelu(y1.data(), n_tok * M, pool);
  linear(p.proj2, p.proj2_b, y1.data(), n_tok, y2.data(), kern, pool, scratch);
  // out [n_tok][T] in raster order of the merged grid
  std::vector<float> out(y2.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    std::copy_n(&y2[static_cast<size_t>(l.place_of_token[static_cast<size_t>(t)] * T)], T, &out[static_cast<size_t>(t * T)]);
  }
  return out;
}

}  // namespace

std::vector<float> encode(const projector& p, const image_tile& tile, thread_pool& pool,
                          const kernels::dot_kernels& kern) {
  if (qwen_family(p.hparams().family)) {
    return encode_qwen(p, tile.pixels, tile.width, tile.height, kern, pool);
  }
  return encode(p, tile.pixels, pool, kern);
}

std::vector<float> encode(const projector& p, const std::vector<float>& pixels, thread_pool& pool,
                          const kernels::dot_kernels& kern) {
  const vision_hparams& hp = p.hparams();
  if (qwen_family(hp.family)) {
    throw std::invalid_argument("vision encode: a Qwen-VL tile needs its size (encode an image_tile)");
  }
  const int64_t S = hp.image_size, P = hp.patch_size, G = hp.grid(), N = hp.n_patches(), E = hp.n_embd;
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
  run_blocks(p, h, N, nullptr, kern, pool, scratch);

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
