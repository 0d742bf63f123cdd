// Paged attention over the KV cache, one query token per row (decode, and prefill chunks and
// verification wherever the tiled prefill kernel does not take them), the split combine, and
// the KV-cache store.
//
// Pass 1, grid (n_tok * n_head_kv * n_chunks, n_splits), kDecodeWarps warps per block. A
// block owns one token t, one KV head, a chunk of GB of the G query heads that share that KV
// head (plan_gqa_groups in gpu/plan/launch_config.h) and the keys
// [lo + split * keys_per_split, lo + (split + 1) * keys_per_split) of t's visible keys
// [lo, p], p = positions[t], lo = max(0, p - window + 1) with a window and 0 without. Keys
// outside [lo, p] are never loaded, nor their block-table entries.
// Inside the block the keys are dealt to sub-groups of LPK lanes (attention_lanes_per_key):
// lane j of a sub-group holds dimensions [8j, 8j + 8) of a key and of its value (one load
// each: 16 bytes of F16 or 8 bytes of E4M3, converted to floats exactly; lanes with
// 8j >= head_dim hold nothing) and of the GB query rows (registers,
// pre-scaled by scale * log2(e), so scores are in base 2). A sub-group takes NK keys per
// step, reduces each key's GB dot products over its lanes by shuffles, and folds them into GB
// running softmax states (m, l, acc[8 dimensions per lane]); every key and value is read
// once for all GB heads. The states are merged across the sub-groups of a warp by shuffles,
// then across warps in shared memory. With one split the block writes the output rows;
// otherwise one partial per (token, query head, split):
//
//   partials[((t * n_head + h) * n_splits + split) * (head_dim + 2)] = [ m | l | acc[head_dim] ]
//
// m is the largest score in log2 units, acc is not divided by l, and an empty split has
// l = 0 (m = -FLT_MAX, acc = 0).
//
// Pass 2 (n_splits > 1), one block per (token, query head):
//   out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M),  M = max_s m_s.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"

namespace tandem::gpu {
namespace {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kMaxHeadDim = 256;
constexpr float kLog2e = 1.4426950408889634f;

// The cache's elements: `elem` is one stored value, `raw` one load of 8 of them.
template <kv_dtype E>
struct kv_elems;
template <>
struct kv_elems<kv_dtype::f16> {
  using elem = uint16_t;
  using raw = uint4;
};
template <>
struct kv_elems<kv_dtype::fp8_e4m3> {
  using elem = uint8_t;
  using raw = uint2;
};

__device__ __forceinline__ uint16_t to_elem(float x, uint16_t*) { return __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ uint8_t to_elem(float x, uint8_t*) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// One block per token: its n_head_kv * head_dim keys and values to their slot.
template <kv_dtype E>
__global__ void kv_store_kernel(const float* k, const float* v, const int32_t* slots, kv_layer kv) {
  using elem = typename kv_elems<E>::elem;
  elem* kc = reinterpret_cast<elem*>(kv.k);
  elem* vc = reinterpret_cast<elem*>(kv.v);
  const int32_t t = blockIdx.x;
  const int32_t kv_dim = kv.n_head_kv * kv.head_dim;
  const int64_t block = slots[t] / kv.block_tokens, slot = slots[t] % kv.block_tokens;
  for (int32_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    const int32_t h = i / kv.head_dim, d = i % kv.head_dim;
    const int64_t at = ((block * kv.n_head_kv + h) * kv.block_tokens + slot) * kv.head_dim + d;
    kc[at] = to_elem(k[static_cast<int64_t>(t) * kv_dim + i], kc);
    vc[at] = to_elem(v[static_cast<int64_t>(t) * kv_dim + i], vc);
  }
}

// Eight cached elements of one load, as floats (exact for both types).
__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t w) {
  return make_float2(__half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu))),
                     __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16))));
}
__device__ __forceinline__ void unpack8(const uint4& r, float (&f)[8]) {
  const float2 a = half2_bits_to_float2(r.x), b = half2_bits_to_float2(r.y);
  const float2 c = half2_bits_to_float2(r.z), d = half2_bits_to_float2(r.w);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}
// Two E4M3 bytes (the lower one first) as floats, through F16 (cvt.rn.f16x2.e4m3x2).
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t w) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(h));
}
__device__ __forceinline__ void unpack8(const uint2& r, float (&f)[8]) {
  const float2 a = e4m3x2_to_float2(r.x), b = e4m3x2_to_float2(r.x >> 16);
  const float2 c = e4m3x2_to_float2(r.y), d = e4m3x2_to_float2(r.y >> 16);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}

// Sum over the LPK lanes of an aligned sub-group (the result is in every lane of it).
template <int LPK>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int o = LPK / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// E the cache's element type, LPK lanes per key (4, 8, 16 or 32), GB query heads per block
// (1, 2, 4 or 8), NK keys per sub-group and step. Dynamic shared memory:
// kDecodeWarps * GB * head_dim floats.
template <kv_dtype E, int LPK, int GB, int NK>
__global__ void __launch_bounds__(kDecodeThreads, 2)
    decode_attention_kernel(const float* __restrict__ q, const int32_t* __restrict__ positions,
                            const int32_t* __restrict__ row_seq, const int32_t* __restrict__ tables, kv_layer kv,
                            attention_args a, int32_t n_chunks, float* __restrict__ partials, float* __restrict__ out) {
  using elem = typename kv_elems<E>::elem;
  using raw = typename kv_elems<E>::raw;
  constexpr int kKeysPerWarp = 32 / LPK;
  constexpr int kGroups = kDecodeWarps * kKeysPerWarp;  // sub-groups per block
  constexpr int kStep = kGroups * NK;                   // keys per block and step
  __shared__ float s_m[kDecodeWarps][GB], s_l[kDecodeWarps][GB];
  extern __shared__ float4 s_decode_raw[];
  float* s_acc = reinterpret_cast<float*>(s_decode_raw);  // [kDecodeWarps][GB][head_dim]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = lane % LPK;                         // lane within the sub-group
  const int sg = warp * kKeysPerWarp + lane / LPK;  // sub-group within the block
  const int32_t hd = kv.head_dim, n_kv = kv.n_head_kv, bt = kv.block_tokens;
  const bool active = j * 8 < hd;
  const int32_t G = a.n_head / n_kv;
  const int32_t chunk = static_cast<int32_t>(blockIdx.x) % n_chunks;
  const int32_t pair = static_cast<int32_t>(blockIdx.x) / n_chunks;
  const int32_t kvh = pair % n_kv, t = pair / n_kv;
  const int32_t h0 = kvh * G + chunk * GB;  // first query head of the block
  const int32_t ng = min(GB, G - chunk * GB);

  float qv[GB][8], acc[GB][8], m[GB], l[GB];
  const float qs = a.scale * kLog2e;
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f), y = x;
    if (g < ng && active) {
      const float4* p = reinterpret_cast<const float4*>(q + (static_cast<int64_t>(t) * a.n_head + h0 + g) * hd + j * 8);
      x = p[0];
      y = p[1];
    }
    qv[g][0] = x.x * qs, qv[g][1] = x.y * qs, qv[g][2] = x.z * qs, qv[g][3] = x.w * qs;
    qv[g][4] = y.x * qs, qv[g][5] = y.y * qs, qv[g][6] = y.z * qs, qv[g][7] = y.w * qs;
#pragma unroll
    for (int d = 0; d < 8; ++d) acc[g][d] = 0.0f;
    m[g] = -FLT_MAX;
    l[g] = 0.0f;
  }

  // The split's keys [k_begin, k_end) of the visible keys [lo, pos].
  const int32_t pos = positions[t];
  const int32_t lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int32_t k_begin = lo + static_cast<int32_t>(blockIdx.y) * a.keys_per_split;
  const int32_t k_end = min(pos + 1, k_begin + a.keys_per_split);
  const int32_t* table = tables + static_cast<int64_t>(row_seq[t]) * a.table_width;
  const elem* kc = reinterpret_cast<const elem*>(kv.k);
  const elem* vc = reinterpret_cast<const elem*>(kv.v);
  const int64_t block_stride = static_cast<int64_t>(n_kv) * bt * hd;  // elements per KV block
  const int64_t head_offset = static_cast<int64_t>(kvh) * bt * hd + j * 8;

  // The loop bounds are the same for the whole block, so every lane reaches the shuffles.
  for (int32_t base = k_begin; base < k_end; base += kStep) {
    raw kr[NK], vr[NK];
#pragma unroll
    for (int c = 0; c < NK; ++c) {
      const int32_t key = base + c * kGroups + sg;
      kr[c] = vr[c] = raw{};
      if (key < k_end && active) {
        const int64_t at = table[key / bt] * block_stride + head_offset + static_cast<int64_t>(key % bt) * hd;
        kr[c] = __ldg(reinterpret_cast<const raw*>(kc + at));
        vr[c] = __ldg(reinterpret_cast<const raw*>(vc + at));
      }
    }
    float s[NK][GB];
#pragma unroll
    for (int c = 0; c < NK; ++c) {
      float kf[8];
      unpack8(kr[c], kf);
      const bool valid = base + c * kGroups + sg < k_end;
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < 8; ++d) dot = fmaf(qv[g][d], kf[d], dot);
        dot = group_sum<LPK>(dot);
        s[c][g] = valid ? dot : -INFINITY;
      }
    }
    // Rescale each head's state to the step's new maximum, then add the step's keys.
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float mx = m[g];
#pragma unroll
      for (int c = 0; c < NK; ++c) mx = fmaxf(mx, s[c][g]);
      const float corr = exp2f(m[g] - mx);
      l[g] *= corr;
#pragma unroll
      for (int d = 0; d < 8; ++d) acc[g][d] *= corr;
      m[g] = mx;
    }
#pragma unroll
    for (int c = 0; c < NK; ++c) {
      float vf[8];
      unpack8(vr[c], vf);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float p = exp2f(s[c][g] - m[g]);  // 0 for a masked key
        l[g] += p;
#pragma unroll
        for (int d = 0; d < 8; ++d) acc[g][d] = fmaf(p, vf[d], acc[g][d]);
      }
    }
  }

  // Merge the sub-groups of the warp: lane ^ o holds the same dimensions of another one.
  // An empty state (m = -FLT_MAX, l = 0) contributes nothing.
#pragma unroll
  for (int o = LPK; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[g], o), lo = __shfl_xor_sync(0xffffffffu, l[g], o);
      const float mn = fmaxf(m[g], mo), ca = exp2f(m[g] - mn), cb = exp2f(mo - mn);
      l[g] = l[g] * ca + lo * cb;
#pragma unroll
      for (int d = 0; d < 8; ++d) acc[g][d] = acc[g][d] * ca + __shfl_xor_sync(0xffffffffu, acc[g][d], o) * cb;
      m[g] = mn;
    }
  }
  if (lane < LPK) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      if (lane == 0) s_m[warp][g] = m[g], s_l[warp][g] = l[g];
      if (active) {
        float4* dst = reinterpret_cast<float4*>(s_acc + (warp * GB + g) * hd + j * 8);
        dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
        dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
      }
    }
  }
  __syncthreads();

  // Merge the warps: one output element (head g, dimension d) per thread and pass.
  for (int32_t i = threadIdx.x; i < ng * hd; i += kDecodeThreads) {
    const int32_t g = i / hd, d = i % hd;
    float M = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, s_m[w][g]);
    float L = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float c = exp2f(s_m[w][g] - M);
      L += s_l[w][g] * c;
      sum += s_acc[(w * GB + g) * hd + d] * c;
    }
    const int64_t row = static_cast<int64_t>(t) * a.n_head + h0 + g;  // (token, query head)
    if (gridDim.y == 1) {
      out[row * hd + d] = L > 0.0f ? sum / L : 0.0f;
    } else {
      float* p = partials + (row * gridDim.y + blockIdx.y) * (hd + 2);
      p[2 + d] = sum;
      if (d == 0) p[0] = M, p[1] = L;
    }
  }
}

__global__ void attention_combine_kernel(const float* partials, int32_t n_splits, int32_t hd, float* out) {
  const int32_t row = blockIdx.x;  // t * n_head + h: the heads of a token side by side
  const float* p = partials + static_cast<int64_t>(row) * n_splits * (hd + 2);
  float M = -FLT_MAX;
  for (int32_t s = 0; s < n_splits; ++s) {
    if (p[s * (hd + 2) + 1] > 0.0f) M = fmaxf(M, p[s * (hd + 2)]);
  }
  float L = 0.0f;
  for (int32_t s = 0; s < n_splits; ++s) {
    const float l = p[s * (hd + 2) + 1];
    if (l > 0.0f) L += l * exp2f(p[s * (hd + 2)] - M);
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  float* o = out + static_cast<int64_t>(row) * hd;
  for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int32_t s = 0; s < n_splits; ++s) {
      const float l = p[s * (hd + 2) + 1];
      if (l > 0.0f) sum += p[s * (hd + 2) + 2 + d] * exp2f(p[s * (hd + 2)] - M);
    }
    o[d] = sum * inv;
  }
}

// A launch's arguments; the templates below pick the element type, lanes per key and group
// bucket the kernel is compiled for.
struct decode_launch {
  dim3 grid;
  size_t shared = 0;
  const float* q = nullptr;
  const int32_t *positions = nullptr, *row_seq = nullptr, *tables = nullptr;
  kv_layer kv;
  attention_args a;
  int32_t n_chunks = 1;
  float *partials = nullptr, *out = nullptr;
  stream_handle s = nullptr;
};

template <kv_dtype E, int LPK, int GB>
void launch_decode_group(const decode_launch& l) {
  // Fewer keys in flight per step where the GB states already take the registers; twice as
  // many of E4M3's 8-byte loads as of F16's 16-byte ones, the same bytes in flight.
  constexpr int kKeys = (GB >= 8 ? 2 : 4) * (E == kv_dtype::fp8_e4m3 ? 2 : 1);
  decode_attention_kernel<E, LPK, GB, kKeys><<<l.grid, kDecodeThreads, l.shared, l.s>>>(
      l.q, l.positions, l.row_seq, l.tables, l.kv, l.a, l.n_chunks, l.partials, l.out);
}

template <kv_dtype E, int LPK>
void launch_decode_lanes(uint32_t bucket, const decode_launch& l) {
  switch (bucket) {
    case 1:
      return launch_decode_group<E, LPK, 1>(l);
    case 2:
      return launch_decode_group<E, LPK, 2>(l);
    case 4:
      return launch_decode_group<E, LPK, 4>(l);
    default:
      return launch_decode_group<E, LPK, 8>(l);
  }
}

template <kv_dtype E>
void launch_decode_type(uint32_t lanes, uint32_t bucket, const decode_launch& l) {
  switch (lanes) {
    case 4:
      return launch_decode_lanes<E, 4>(bucket, l);
    case 8:
      return launch_decode_lanes<E, 8>(bucket, l);
    case 16:
      return launch_decode_lanes<E, 16>(bucket, l);
    default:
      return launch_decode_lanes<E, 32>(bucket, l);
  }
}

}  // namespace

void launch_kv_store(const float* k, const float* v, const int32_t* slots, int32_t n_tok, const kv_layer& kv,
                     stream_handle s) {
  if (n_tok <= 0) return;
  if (kv.dtype == kv_dtype::fp8_e4m3) {
    kv_store_kernel<kv_dtype::fp8_e4m3><<<n_tok, 256, 0, s>>>(k, v, slots, kv);
  } else {
    kv_store_kernel<kv_dtype::f16><<<n_tok, 256, 0, s>>>(k, v, slots, kv);
  }
  check_launch("kv_store");
}

void launch_paged_attention(const float* q, const int32_t* positions, const int32_t* row_seq, const int32_t* tables,
                            int32_t n_tok, const kv_layer& kv, const attention_args& a, float* partials, float* out,
                            stream_handle s) {
  if (n_tok <= 0) return;
  const int32_t hd = kv.head_dim;
  if (hd % 8 != 0 || hd < 8 || hd > kMaxHeadDim) {
    throw cuda_error("paged attention: head_dim must be a multiple of 8 up to 256");
  }
  if (kv.n_head_kv < 1 || a.n_head < kv.n_head_kv || a.n_head % kv.n_head_kv != 0) {
    throw cuda_error("paged attention: n_head must be a multiple of n_head_kv");
  }
  if (a.n_splits < 1 || a.n_splits > 65535 || a.keys_per_split < 1 || a.window < 0) {
    throw cuda_error("paged attention: bad split plan");
  }
  if ((reinterpret_cast<uintptr_t>(kv.k) | reinterpret_cast<uintptr_t>(kv.v) | reinterpret_cast<uintptr_t>(q)) % 16) {
    throw cuda_error("paged attention: q and the KV cache must be 16-byte aligned");
  }
  const gqa_groups gg = plan_gqa_groups(static_cast<uint32_t>(a.n_head), static_cast<uint32_t>(kv.n_head_kv));
  decode_launch l;
  l.grid = dim3(static_cast<uint32_t>(n_tok) * kv.n_head_kv * gg.n_chunks, static_cast<uint32_t>(a.n_splits));
  l.shared = static_cast<size_t>(kDecodeWarps) * gg.bucket * hd * sizeof(float);
  l.q = q, l.positions = positions, l.row_seq = row_seq, l.tables = tables;
  l.kv = kv, l.a = a, l.n_chunks = static_cast<int32_t>(gg.n_chunks);
  l.partials = partials, l.out = out, l.s = s;
  const uint32_t lanes = attention_lanes_per_key(static_cast<uint32_t>(hd));
  if (kv.dtype == kv_dtype::fp8_e4m3) {
    launch_decode_type<kv_dtype::fp8_e4m3>(lanes, gg.bucket, l);
  } else {
    launch_decode_type<kv_dtype::f16>(lanes, gg.bucket, l);
  }
  check_launch("paged_attention");
  if (a.n_splits > 1) {
    attention_combine_kernel<<<n_tok * a.n_head, 128, 0, s>>>(partials, a.n_splits, hd, out);
    check_launch("attention_combine");
  }
}

}  // namespace tandem::gpu
