// Decode and small-batch matrix products y[t][r] = sum_c W[r][c] x[t][c] over the device
// weight layouts (gpu/formats/weight_layout.h), and the activation quantizer that feeds the
// integer dot products of the quantized formats.
//
// Block: 4 warps, in groups of S warps; a group computes R consecutive rows, its warps taking
// every S-th 32-chunk stride of the row (S > 1 where a matrix has too few rows to fill the
// device). Lane l of warp part s handles chunks c = 32 s + l, + 32 S, ...: one step of a
// warp reads 32 consecutive 64-element chunks, so its 16-byte weight loads cover a
// contiguous stretch of each row (coalesced). Weights are loaded for R rows (and for two
// steps when they fit in registers) before any arithmetic, so each lane keeps several
// hundred bytes in flight; activations are read from L1/L2 per token (NT tokens per pass,
// the weights read once per pass): float runs for F32/F16/BF16, q8 runs (int8 quants, d, s)
// for the quantized formats, dotted with dp4a.
//
//   grid.x: row groups (rows / (R * 4 / S))    grid.y: token tiles of NT
#include <cuda_runtime.h>

#include "gpu/formats/block_math.h"
#include "gpu/kernels.h"

namespace tandem::gpu {
namespace {

constexpr int kBlockWarps = 4;

// Output row r (of the fused matrix) to its segment: y[k][t * rows_k + r - start_k]. Only
// constant indices into `o` (a run-time index would copy the parameter to local memory).
__device__ __forceinline__ void store_row(const gemv_outputs& o, int64_t r, int64_t t, float v) {
  static_assert(kMaxGemvOutputs == 3, "store_row selects among three outputs");
  float* y = o.y[0];
  int32_t start = 0, len = o.end[0];
  if (o.n > 1 && r >= o.end[0]) y = o.y[1], start = o.end[0], len = o.end[1] - o.end[0];
  if (o.n > 2 && r >= o.end[1]) y = o.y[2], start = o.end[1], len = o.end[2] - o.end[1];
  y[t * len + (r - start)] = v;
}

__device__ __forceinline__ void load_q8_run(const int8_t* xq, const float* xds, int64_t at, fmt::q8_run& r) {
  const int4 a = *reinterpret_cast<const int4*>(xq + at);
  const int4 b = *reinterpret_cast<const int4*>(xq + at + 16);
  r.q[0] = a.x, r.q[1] = a.y, r.q[2] = a.z, r.q[3] = a.w;
  r.q[4] = b.x, r.q[5] = b.y, r.q[6] = b.z, r.q[7] = b.w;
  const float2 ds = *reinterpret_cast<const float2*>(xds + 2 * (at / fmt::kRun));
  r.d = ds.x, r.s = ds.y;
}

__device__ __forceinline__ void load_float_run(const float* x, float (&out)[fmt::kRun]) {
  const float4* p = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int i = 0; i < fmt::kRun / 4; ++i) {
    const float4 f = p[i];
    out[4 * i] = f.x, out[4 * i + 1] = f.y, out[4 * i + 2] = f.z, out[4 * i + 3] = f.w;
  }
}

// acc[i][t] += row r0 + i's chunk c . token t0 + t's activations.
template <tensor_type T, int NT, int R>
__device__ __forceinline__ void accumulate(const typename fmt::format<T>::regs (&w)[R], int64_t c, const float* xf,
                                           const int8_t* xq, const float* xds, int64_t cols, int32_t t0, int nt,
                                           float (&acc)[R][NT]) {
  using F = fmt::format<T>;
  const int64_t a0 = F::run_start(c, 0), a1 = F::run_start(c, 1);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < nt) {
      const int64_t row = static_cast<int64_t>(t0 + t) * cols;
      if constexpr (F::kIntDot) {
        fmt::q8_run x0, x1;
        load_q8_run(xq, xds, row + a0, x0);
        load_q8_run(xq, xds, row + a1, x1);
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][t] += fmt::dot_q8<T>(w[i], c, x0, x1);
      } else {
        float x0[fmt::kRun], x1[fmt::kRun];
        load_float_run(xf + row + a0, x0);
        load_float_run(xf + row + a1, x1);
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][t] += F::dot(w[i], x0, x1);
      }
    }
  }
}

template <tensor_type T, int NT, int R, int S>
__global__ void __launch_bounds__(kBlockWarps * 32)
    gemv_kernel(fmt::matrix_view wv, int32_t rows, int32_t n_chunks, const float* xf, const int8_t* xq,
                const float* xds, int32_t cols, int32_t n_tok, gemv_outputs out) {
  using F = fmt::format<T>;
  constexpr int kGroups = kBlockWarps / S;
  // Two steps' weights in flight when they fit comfortably in registers.
  constexpr int kSteps = R * F::kLoadBytes <= 96 ? 2 : 1;
  __shared__ float partial[kBlockWarps][R][NT];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / S, part = warp % S;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kGroups + group) * R;
  const int32_t t0 = blockIdx.y * NT;
  const int nt = min(NT, n_tok - t0);
  // Rows past the end read the last row (valid memory) and are never stored.
  int64_t row[R];
#pragma unroll
  for (int i = 0; i < R; ++i) row[i] = min(r0 + i, static_cast<int64_t>(rows) - 1);

  float acc[R][NT];
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t] = 0.0f;
  }

  const int64_t stride = 32 * S;
  for (int64_t c = part * 32 + lane; c < n_chunks; c += kSteps * stride) {
    typename F::regs w[kSteps][R];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      if (u == 0 || c + u * stride < n_chunks) {
#pragma unroll
        for (int i = 0; i < R; ++i) F::load(wv, row[i], c + u * stride, w[u][i]);
      }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      if (u == 0 || c + u * stride < n_chunks) {
        accumulate<T, NT, R>(w[u], c + u * stride, xf, xq, xds, cols, t0, nt, acc);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float s = acc[i][t];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      acc[i][t] = s;
    }
  }
  if constexpr (S == 1) {
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          if (r0 + i < rows && t < nt) store_row(out, r0 + i, t0 + t, acc[i][t]);
        }
      }
    }
  } else {
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
#pragma unroll
        for (int t = 0; t < NT; ++t) partial[warp][i][t] = acc[i][t];
      }
    }
    __syncthreads();
    // The group's first warp adds its parts in a fixed order: lane j takes (i, t) = j.
    if (part == 0 && lane < R * NT) {
      const int i = lane / NT, t = lane % NT;
      float s = 0.0f;
#pragma unroll
      for (int p = 0; p < S; ++p) s += partial[warp + p][i][t];
      if (r0 + i < rows && t < nt) store_row(out, r0 + i, t0 + t, s);
    }
  }
}

// One warp per 32-element run: d = max|x| / 127, q = rint(x / d), s = d * sum(q), exactly
// as fmt::quantize_run (the CPU tests' reference).
__global__ void quantize_q8_kernel(const float* x, int64_t n_runs, int8_t* q, float* ds) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t run = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; run < n_runs;
       run += warps) {
    const float v = x[run * fmt::kRun + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    const int qi = __float2int_rn(v * id);
    int sum = qi;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    q[run * fmt::kRun + lane] = static_cast<int8_t>(qi);
    if (lane == 0) ds[2 * run] = d, ds[2 * run + 1] = d * static_cast<float>(sum);
  }
}

template <tensor_type T, int NT, int R, int S>
void launch_variant(const fmt::matrix_view& wv, int32_t rows, int32_t cols, const float* xf, const int8_t* xq,
                    const float* xds, int32_t n_tok, const gemv_outputs& out, stream_handle s) {
  constexpr int rows_per_block = R * kBlockWarps / S;
  const dim3 grid((rows + rows_per_block - 1) / rows_per_block, (n_tok + NT - 1) / NT);
  gemv_kernel<T, NT, R, S>
      <<<grid, kBlockWarps * 32, 0, s>>>(wv, rows, cols / fmt::kChunk, xf, xq, xds, cols, n_tok, out);
}

template <tensor_type T, int NT>
void launch_tile(gemv_variant v, const fmt::matrix_view& wv, int32_t rows, int32_t cols, const float* xf,
                 const int8_t* xq, const float* xds, int32_t n_tok, const gemv_outputs& out, stream_handle s) {
  // F32 rows are 256 bytes a chunk: one row per warp keeps them in registers.
  const int r = T == tensor_type::f32 ? 1 : v.rows_per_warp;
  if (r == 2) {
    launch_variant<T, NT, 2, 1>(wv, rows, cols, xf, xq, xds, n_tok, out, s);
  } else if (v.warps_per_row == 4) {
    launch_variant<T, NT, 1, 4>(wv, rows, cols, xf, xq, xds, n_tok, out, s);
  } else if (v.warps_per_row == 2) {
    launch_variant<T, NT, 1, 2>(wv, rows, cols, xf, xq, xds, n_tok, out, s);
  } else {
    launch_variant<T, NT, 1, 1>(wv, rows, cols, xf, xq, xds, n_tok, out, s);
  }
}

}  // namespace

void launch_quantize_q8(const float* x, int32_t n_tok, int32_t cols, int8_t* q, float* ds, stream_handle s) {
  if (n_tok <= 0) return;
  if (cols % fmt::kRun != 0) throw cuda_error("quantize_q8: columns must be a multiple of 32");
  const int64_t runs = static_cast<int64_t>(n_tok) * cols / fmt::kRun;
  const auto grid = static_cast<uint32_t>(std::min<int64_t>((runs + 7) / 8, 65535));
  quantize_q8_kernel<<<grid, 256, 0, s>>>(x, runs, q, ds);
  check_launch("quantize_q8");
}

void launch_gemv(const matrix_layout& w, const void* base, const gemv_activations& x, int32_t n_tok,
                 const gemv_outputs& out, gemv_variant v, stream_handle s) {
  if (w.rows <= 0 || n_tok <= 0) return;
  const fmt::matrix_view wv = view_of(w, base);
  const auto rows = static_cast<int32_t>(w.rows), cols = static_cast<int32_t>(w.cols);
  const int32_t tile = gemv_token_tile(n_tok);
  const bool ok = fmt::with_format(w.type, [&](auto tc) {
    constexpr tensor_type T = decltype(tc)::value;
    if (fmt::format<T>::kIntDot && (x.q == nullptr || x.ds == nullptr)) {
      throw cuda_error("gemv: quantized weights need quantized activations");
    }
    if (!fmt::format<T>::kIntDot && x.f == nullptr) throw cuda_error("gemv: float weights need float activations");
    switch (tile) {
      case 1:
        launch_tile<T, 1>(v, wv, rows, cols, x.f, x.q, x.ds, n_tok, out, s);
        break;
      case 2:
        launch_tile<T, 2>(v, wv, rows, cols, x.f, x.q, x.ds, n_tok, out, s);
        break;
      case 4:
        launch_tile<T, 4>(v, wv, rows, cols, x.f, x.q, x.ds, n_tok, out, s);
        break;
      default:
        launch_tile<T, 8>(v, wv, rows, cols, x.f, x.q, x.ds, n_tok, out, s);
        break;
    }
  });
  if (!ok) throw cuda_error("gemv: no device format for this weight type");
  check_launch("gemv");
}

}  // namespace tandem::gpu
