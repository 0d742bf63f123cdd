// Paged attention (decode, prefill chunks, verification) and the KV-cache store.
//
// Pass 1, grid (n_tok * n_head, n_splits), 4 warps per block: the warps of a block take
// turns over the keys of one split (key k to warp k % 4); a warp scores a key with each
// lane holding head_dim / 32 consecutive dimensions, then folds it into a running
// (max m, sum l, acc[head_dim]) softmax state. The block merges its four warp states and
// writes one partial:
//
//   partials[(pair * n_splits + split)] = [ m | l | acc[0..head_dim) ]   (acc not divided by l)
//
// Pass 2, one block per pair: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
#include <cuda_runtime.h>

#include <cfloat>

#include "gpu/kernels.h"
#include "gpu/weight_load.cuh"

namespace tandem::gpu {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDimsPerLane = 8;  // head_dim <= 256

__global__ void kv_store_kernel(const float* k, const float* v, const int32_t* slots, kv_layer kv) {
  const int32_t t = blockIdx.x;
  const int32_t kv_dim = kv.n_head_kv * kv.head_dim;
  const int64_t block = slots[t] / kv.block_tokens, slot = slots[t] % kv.block_tokens;
  for (int32_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    const int32_t h = i / kv.head_dim, d = i % kv.head_dim;
    const int64_t at = ((block * kv.n_head_kv + h) * kv.block_tokens + slot) * kv.head_dim + d;
    kv.k[at] = __half_as_ushort(__float2half_rn(k[static_cast<int64_t>(t) * kv_dim + i]));
    kv.v[at] = __half_as_ushort(__float2half_rn(v[static_cast<int64_t>(t) * kv_dim + i]));
  }
}

__global__ void attention_partial_kernel(const float* q, const int32_t* positions, const int32_t* row_seq,
                                         const int32_t* tables, kv_layer kv, attention_args a, float* partials) {
  __shared__ float s_m[kWarps], s_l[kWarps];
  extern __shared__ float s_acc[];  // [kWarps][head_dim]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t pair = blockIdx.x, split = blockIdx.y;
  const int32_t t = pair / a.n_head, h = pair % a.n_head;
  const int32_t hd = kv.head_dim, dpl = hd / 32;
  const int32_t kvh = h / (a.n_head / kv.n_head_kv);
  const int32_t n_keys = positions[t] + 1;
  const int32_t k_begin = split * a.keys_per_split;
  const int32_t k_end = min(n_keys, k_begin + a.keys_per_split);
  const int32_t* table = tables + static_cast<int64_t>(row_seq[t]) * a.table_width;

  float qv[kMaxDimsPerLane], acc[kMaxDimsPerLane];
  const float* qp = q + (static_cast<int64_t>(t) * a.n_head + h) * hd + lane * dpl;
#pragma unroll
  for (int d = 0; d < kMaxDimsPerLane; ++d) {
    qv[d] = d < dpl ? qp[d] * a.scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -FLT_MAX, l = 0.0f;
  for (int32_t key = k_begin + warp; key < k_end; key += kWarps) {
    const int64_t block = table[key / kv.block_tokens];
    const int64_t base = ((block * kv.n_head_kv + kvh) * kv.block_tokens + key % kv.block_tokens) * hd + lane * dpl;
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < kMaxDimsPerLane; ++d) {
      if (d < dpl) s += qv[d] * half_bits_to_float(kv.k[base + d]);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float m_new = fmaxf(m, s);
    const float corr = __expf(m - m_new), p = __expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int d = 0; d < kMaxDimsPerLane; ++d) {
      if (d < dpl) acc[d] = acc[d] * corr + p * half_bits_to_float(kv.v[base + d]);
    }
    m = m_new;
  }
  // Merge the warps' states. A warp that saw no key has l = 0 and contributes nothing.
  if (lane == 0) s_m[warp] = m, s_l[warp] = l;
#pragma unroll
  for (int d = 0; d < kMaxDimsPerLane; ++d) {
    if (d < dpl) s_acc[warp * hd + lane * dpl + d] = acc[d];
  }
  __syncthreads();
  float M = -FLT_MAX;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_l[w] > 0.0f ? s_m[w] : -FLT_MAX);
  float* out = partials + (static_cast<int64_t>(pair) * gridDim.y + split) * (hd + 2);
  for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (s_l[w] > 0.0f) sum += s_acc[w * hd + d] * __expf(s_m[w] - M);
    }
    out[2 + d] = sum;
  }
  if (threadIdx.x == 0) {
    float L = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (s_l[w] > 0.0f) L += s_l[w] * __expf(s_m[w] - M);
    }
    out[0] = M;
    out[1] = L;
  }
}

__global__ void attention_combine_kernel(const float* partials, int32_t n_splits, int32_t hd, int32_t n_head,
                                         float* out) {
  const int32_t pair = blockIdx.x;
  const float* p = partials + static_cast<int64_t>(pair) * n_splits * (hd + 2);
  float M = -FLT_MAX;
  for (int32_t s = 0; s < n_splits; ++s) {
    if (p[s * (hd + 2) + 1] > 0.0f) M = fmaxf(M, p[s * (hd + 2)]);
  }
  float L = 0.0f;
  for (int32_t s = 0; s < n_splits; ++s) {
    const float l = p[s * (hd + 2) + 1];
    if (l > 0.0f) L += l * __expf(p[s * (hd + 2)] - M);
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  float* o = out + static_cast<int64_t>(pair) * hd;  // pair = t * n_head + h: heads side by side
  for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int32_t s = 0; s < n_splits; ++s) {
      const float l = p[s * (hd + 2) + 1];
      if (l > 0.0f) sum += p[s * (hd + 2) + 2 + d] * __expf(p[s * (hd + 2)] - M);
    }
    o[d] = sum * inv;
  }
}

}  // namespace

void launch_kv_store(const float* k, const float* v, const int32_t* slots, int32_t n_tok, const kv_layer& kv,
                     stream_handle s) {
  if (n_tok <= 0) return;
  kv_store_kernel<<<n_tok, 256, 0, s>>>(k, v, slots, kv);
  check_launch("kv_store");
}

void launch_paged_attention(const float* q, const int32_t* positions, const int32_t* row_seq, const int32_t* tables,
                            int32_t n_tok, const kv_layer& kv, const attention_args& a, float* partials, float* out,
                            stream_handle s) {
  if (n_tok <= 0) return;
  if (kv.head_dim % 32 != 0 || kv.head_dim > 32 * kMaxDimsPerLane) {
    throw cuda_error("paged attention: head_dim must be a multiple of 32 up to 256");
  }
  if (a.n_splits < 1 || a.keys_per_split < 1) throw cuda_error("paged attention: bad split plan");
  const dim3 grid(static_cast<uint32_t>(n_tok * a.n_head), static_cast<uint32_t>(a.n_splits));
  const size_t shared = static_cast<size_t>(kWarps) * kv.head_dim * sizeof(float);
  attention_partial_kernel<<<grid, kWarps * 32, shared, s>>>(q, positions, row_seq, tables, kv, a, partials);
  check_launch("paged_attention");
  attention_combine_kernel<<<n_tok * a.n_head, 128, 0, s>>>(partials, a.n_splits, kv.head_dim, a.n_head, out);
  check_launch("attention_combine");
}

}  // namespace tandem::gpu
