// Tiled (flash) attention over the paged KV cache for prefill chunks and mixed steps, on the
// tensor cores (mma.sync m16n8k16: F16 inputs, F32 accumulation).
//
// Grid (n_tiles, n_head_kv), kPrefillWarps warps per block. A block owns one query tile
// (gpu/plan/launch_config.h: up to 64 / G consecutive rows of one sequence) and one KV head,
// and packs the tile's tokens with the G query heads of that KV head into 64 matrix rows
// (packed row r = token first_row + r / G, query head kv_head * G + r % G; rows past
// n_rows * G are padding with position -1). Warp w owns packed rows [16w, 16w + 16). A row
// at position p sees keys [lo, p], lo = max(0, p - window + 1) with a window, else 0.
//
// Shared memory (F16, rows padded to HD + 8 halves so that every ldmatrix phase touches 32
// distinct banks):
//   sQ [64][HD + 8]   the tile's queries, rounded to F16 once
//   F16 cache:  sK [2][kKeys][HD + 8], sV [2][kKeys][HD + 8]   two chunks of keys and values
//   E4M3 cache: sK [kKeys][HD + 8], sV [kKeys][HD + 8]         the chunk in use, as F16
//               stage [2][K, V][kKeys][HD] bytes               two chunks as stored
//   s_pos [64]        each packed row's position
// The block walks the keys [key_lo, max position of the tile] in chunks of kKeys (64, or 32
// for HD = 256), key_lo the earliest key any of its rows sees: keys before it, and their
// block-table entries, are never read. Each chunk is read from the cache once, by cp.async
// into one buffer while the other is used: keys past the tile's last position are
// zero-filled (stale cache bytes may be NaN). E4M3 chunks land in `stage` and are converted
// to F16 (exactly) in sK/sV before use. Per chunk, each warp computes
// S = Q K^T (16 x kKeys) with ldmatrix fragments, scales it to base 2, masks keys outside
// [lo, p] with -inf, updates its rows' running max m and sum l, and adds P V to its F32
// output fragments, P rounded to F16 in registers (the accumulator layout of S is the
// A-operand layout of P). A warp skips a chunk that holds no key any of its rows sees.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"

namespace tandem::gpu {
namespace {

constexpr int kPrefillWarps = 4;
constexpr int kPrefillThreads = kPrefillWarps * 32;
constexpr int kRows = static_cast<int>(kPrefillTileRows);  // 16 per warp
static_assert(kRows == 16 * kPrefillWarps, "each warp owns one m16 row block");
constexpr float kLog2e = 1.4426950408889634f;

template <int HD, kv_dtype E>
struct prefill_shape {
  static constexpr bool kFp8 = E == kv_dtype::fp8_e4m3;
  static constexpr int kKeys = HD <= 128 ? 64 : 32;  // keys per chunk
  static constexpr int kStride = HD + 8;             // halves per shared row
  static constexpr int kF16Chunks = kFp8 ? 1 : 2;    // chunks held as F16 (sK, sV)
  static constexpr size_t kStageBytes = kFp8 ? size_t{2} * 2 * kKeys * HD : 0;
  static constexpr size_t kSharedBytes =
      static_cast<size_t>(kRows + 2 * kF16Chunks * kKeys) * kStride * sizeof(__half) + kStageBytes +
      kRows * sizeof(int32_t);
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 F16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and lane l
// receives (row l / 4, columns 2 (l % 4), 2 (l % 4) + 1) of each (with .trans: rows
// 2 (l % 4), 2 (l % 4) + 1 of column l / 4).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __half* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p))
               : "memory");
}

// d += a b for one m16n8k16 tile. Lane l = 4 g + t holds a = {A[g][2t..], A[g+8][2t..],
// A[g][8+2t..], A[g+8][8+2t..]}, b = {B[2t..][g], B[8+2t..][g]} (pairs of F16, the lower
// index in the low half) and d = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared without a register round trip; bytes = 0 writes zeros and reads
// nothing. Completion: cp_async_commit closes a group, cp_async_wait<n> waits until at most
// n of this thread's groups are pending.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Two E4M3 bytes (the lower one first) as two F16 (exact), the lower one in the low half.
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint32_t w) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
}

// One chunk of kKeys keys (sK, sV: [kKeys][HD + 8] from key kb on) for the warp's 16 rows:
// S = Q K^T, base-2 scores with the keys outside [lo, pos] of each row masked, the running
// max m and sum l (this lane's columns), and O += P V. o, m and l as in
// prefill_attention_kernel; pos and lo of rows g and g + 8.
template <int HD, int kKeys>
__device__ __forceinline__ void attend_chunk(const __half* sQ, const __half* sK, const __half* sV, int32_t kb,
                                             const int32_t (&pos)[2], const int32_t (&lo)[2], float scale,
                                             float (&o)[HD / 8][4], float (&m)[2], float (&l)[2]) {
  constexpr int kStride = HD + 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t4 = lane % 4;
  // S = Q K^T: n-tile n holds keys kb + [8n, 8n + 8).
  float s[kKeys / 8][4];
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    uint32_t qa[4];
    ldmatrix_x4(qa, sQ + (warp * 16 + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int n = 0; n < kKeys / 8; n += 2) {
      uint32_t kf[4];  // b0, b1 of n-tiles n and n + 1
      ldmatrix_x4(kf, sK + (n * 8 + (lane & 7) + (lane >> 4) * 8) * kStride + kk * 16 + ((lane >> 3) & 1) * 8);
      mma_16816(s[n], qa, kf[0], kf[1]);
      mma_16816(s[n + 1], qa, kf[2], kf[3]);
    }
  }

  // Base-2 scores, causal and window mask, and the rows' new maxima (a row's 4 lanes agree
  // on it).
  float mx[2] = {m[0], m[1]};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int32_t key = kb + n * 8 + t4 * 2 + (e & 1);
      s[n][e] = key <= pos[e >> 1] && key >= lo[e >> 1] ? s[n][e] * scale : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float corr = exp2f(m[h] - mx[h]);
    l[h] *= corr;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) o[n][2 * h] *= corr, o[n][2 * h + 1] *= corr;
    m[h] = mx[h];
  }

  // P = 2^(S - m) as F16 A fragments: keys [16j, 16j + 16) are n-tiles 2j and 2j + 1.
  uint32_t pa[kKeys / 16][4];
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = exp2f(s[n][e] - m[e >> 1]);  // 0 where masked
    l[0] += p[0] + p[1];
    l[1] += p[2] + p[3];
    pa[n / 2][(n % 2) * 2] = pack_half2(p[0], p[1]);
    pa[n / 2][(n % 2) * 2 + 1] = pack_half2(p[2], p[3]);
  }

  // O += P V: ldmatrix.trans gives V's B fragments for dimensions [16d, 16d + 16).
#pragma unroll
  for (int j = 0; j < kKeys / 16; ++j) {
#pragma unroll
    for (int d = 0; d < HD / 16; ++d) {
      uint32_t vf[4];  // b0, b1 of dimension tiles 2d and 2d + 1
      ldmatrix_x4_trans(vf, sV + (j * 16 + (lane & 15)) * kStride + d * 16 + (lane >> 4) * 8);
      mma_16816(o[2 * d], pa[j], vf[0], vf[1]);
      mma_16816(o[2 * d + 1], pa[j], vf[2], vf[3]);
    }
  }
}

template <int HD, kv_dtype E>
__global__ void __launch_bounds__(kPrefillThreads)
    prefill_attention_kernel(const float* __restrict__ q, const int32_t* __restrict__ positions,
                             const int32_t* __restrict__ tables, const prefill_tile* __restrict__ tiles, kv_layer kv,
                             attention_args a, float* __restrict__ out) {
  using shape = prefill_shape<HD, E>;
  using elem = std::conditional_t<shape::kFp8, uint8_t, uint16_t>;
  constexpr int kKeys = shape::kKeys, kStride = shape::kStride;
  extern __shared__ uint4 s_prefill_raw[];
  __half* sQ = reinterpret_cast<__half*>(s_prefill_raw);
  __half* sK = sQ + kRows * kStride;
  __half* sV = sK + shape::kF16Chunks * kKeys * kStride;
  uint8_t* s_stage = reinterpret_cast<uint8_t*>(sV + shape::kF16Chunks * kKeys * kStride);
  int32_t* s_pos = reinterpret_cast<int32_t*>(s_stage + shape::kStageBytes);

  const prefill_tile tile = tiles[blockIdx.x];
  const int32_t kvh = static_cast<int32_t>(blockIdx.y), n_kv = kv.n_head_kv, bt = kv.block_tokens;
  const int32_t G = a.n_head / n_kv;
  const int32_t n_packed = tile.n_rows * G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // fragment row and column pair

  // The tile's queries, F16, and each packed row's position.
  for (int i = threadIdx.x; i < kRows * (HD / 4); i += kPrefillThreads) {
    const int r = i / (HD / 4), c = (i % (HD / 4)) * 4;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < n_packed) {
      const int64_t row = tile.first_row + r / G, head = static_cast<int64_t>(kvh) * G + r % G;
      x = *reinterpret_cast<const float4*>(q + (row * a.n_head + head) * HD + c);
    }
    __half2* dst = reinterpret_cast<__half2*>(sQ + r * kStride + c);
    dst[0] = __floats2half2_rn(x.x, x.y);
    dst[1] = __floats2half2_rn(x.z, x.w);
  }
  for (int r = threadIdx.x; r < kRows; r += kPrefillThreads) {
    s_pos[r] = r < n_packed ? positions[tile.first_row + r / G] : -1;
  }
  __syncthreads();
  // A row at position p sees keys [first_key(p), p]; padding rows (p = -1) see none.
  const int32_t window = a.window;
  auto first_key = [window](int32_t p) { return window > 0 ? max(0, p - window + 1) : 0; };
  // The tile's keys [key_lo, n_keys); this warp's keys [warp_lo, warp_last].
  int32_t key_lo = INT32_MAX, n_keys = 0, warp_lo = INT32_MAX, warp_last = -1;
  for (int r = 0; r < kRows; ++r) {
    if (s_pos[r] < 0) continue;
    key_lo = min(key_lo, first_key(s_pos[r]));
    n_keys = max(n_keys, s_pos[r] + 1);
    if (r / 16 == warp) warp_lo = min(warp_lo, first_key(s_pos[r])), warp_last = max(warp_last, s_pos[r]);
  }
  const int32_t pos[2] = {s_pos[warp * 16 + g], s_pos[warp * 16 + g + 8]};
  const int32_t lo[2] = {first_key(pos[0]), first_key(pos[1])};

  const int32_t* table = tables + static_cast<int64_t>(tile.seq) * a.table_width;
  const int64_t block_stride = static_cast<int64_t>(n_kv) * bt * HD;  // elements per KV block
  const elem* k_head = reinterpret_cast<const elem*>(kv.k) + static_cast<int64_t>(kvh) * bt * HD;
  const elem* v_head = reinterpret_cast<const elem*>(kv.v) + static_cast<int64_t>(kvh) * bt * HD;
  const float scale = a.scale * kLog2e;

  float o[HD / 8][4];  // output fragments: dimensions [8n, 8n + 8) of rows g and g + 8
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};  // l: this lane's columns only

  // Chunk i of the keys (from key_lo on) goes to buffer i % 2 (sK/sV for F16, stage for
  // E4M3) in 16-byte copies of kPer elements; chunk i + 1 is in flight while chunk i is used.
  // Keys at or past n_keys are zero-filled.
  constexpr int kPer = 16 / static_cast<int>(sizeof(elem));
  auto load_chunk = [&](int32_t kb, int buf) {
    for (int i = threadIdx.x; i < kKeys * (HD / kPer); i += kPrefillThreads) {
      const int kr = i / (HD / kPer), c = (i % (HD / kPer)) * kPer;
      const int32_t key = kb + kr;
      int64_t at = 0;  // a valid address even where nothing is read
      if (key < n_keys) at = table[key / bt] * block_stride + static_cast<int64_t>(key % bt) * HD + c;
      const uint32_t bytes = key < n_keys ? 16u : 0u;
      if constexpr (shape::kFp8) {
        cp_async_16(s_stage + ((buf * 2 + 0) * kKeys + kr) * HD + c, k_head + at, bytes);
        cp_async_16(s_stage + ((buf * 2 + 1) * kKeys + kr) * HD + c, v_head + at, bytes);
      } else {
        cp_async_16(sK + (buf * kKeys + kr) * kStride + c, k_head + at, bytes);
        cp_async_16(sV + (buf * kKeys + kr) * kStride + c, v_head + at, bytes);
      }
    }
    cp_async_commit();
  };
  // E4M3: stage buffer buf to F16 sK, sV, 8 values per step.
  auto convert_chunk = [&](int buf) {
    for (int i = threadIdx.x; i < kKeys * (HD / 8); i += kPrefillThreads) {
      const int kr = i / (HD / 8), c = (i % (HD / 8)) * 8;
#pragma unroll
      for (int which = 0; which < 2; ++which) {
        const uint2 r = *reinterpret_cast<const uint2*>(s_stage + ((buf * 2 + which) * kKeys + kr) * HD + c);
        const uint4 h = make_uint4(e4m3x2_to_half2_bits(r.x), e4m3x2_to_half2_bits(r.x >> 16),
                                   e4m3x2_to_half2_bits(r.y), e4m3x2_to_half2_bits(r.y >> 16));
        *reinterpret_cast<uint4*>((which == 0 ? sK : sV) + kr * kStride + c) = h;
      }
    }
  };
  load_chunk(key_lo, 0);
  for (int32_t kb = key_lo, buf = 0; kb < n_keys; kb += kKeys, buf ^= 1) {
    if (kb + kKeys < n_keys) {
      load_chunk(kb + kKeys, buf ^ 1);
    } else {
      cp_async_commit();  // an empty group: chunk kb's is still the second newest
    }
    cp_async_wait<1>();  // this thread's copies of chunk kb have landed
    __syncthreads();     // and every thread's (and, E4M3, every warp is done with sK/sV)
    const __half* ck = sK + buf * kKeys * kStride;
    const __half* cv = sV + buf * kKeys * kStride;
    if constexpr (shape::kFp8) {
      convert_chunk(buf);
      __syncthreads();  // the F16 chunk is complete (and stage buffer buf read)
      ck = sK, cv = sV;
    }
    // A warp skips a chunk without a key its rows see.
    if (kb <= warp_last && kb + kKeys > warp_lo) attend_chunk<HD, kKeys>(sQ, ck, cv, kb, pos, lo, scale, o, m, l);
    // F16: buffer buf is read before chunk kb + 2 overwrites it. (E4M3: the barriers above
    // order the next conversion after this use, and the next copy into a stage buffer
    // after its conversion.)
    if constexpr (!shape::kFp8) __syncthreads();
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (pos[h] < 0) continue;  // padding row
    const int r = warp * 16 + g + 8 * h;
    const int64_t row = tile.first_row + r / G, head = static_cast<int64_t>(kvh) * G + r % G;
    const float inv = 1.0f / l[h];  // > 0: the row's own key is never masked
    float* dst = out + (row * a.n_head + head) * HD + t4 * 2;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
  }
}

template <int HD, kv_dtype E>
void launch_prefill_hd(const float* q, const int32_t* positions, const int32_t* tables, const prefill_tile* tiles,
                       int32_t n_tiles, const kv_layer& kv, const attention_args& a, float* out, stream_handle s) {
  constexpr size_t bytes = prefill_shape<HD, E>::kSharedBytes;
  // Above the default 48 KiB a kernel must opt in (per device; a host-side call, not a
  // stream operation).
  check_cuda(cudaFuncSetAttribute(prefill_attention_kernel<HD, E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             "prefill attention: shared memory");
  const dim3 grid(static_cast<uint32_t>(n_tiles), static_cast<uint32_t>(kv.n_head_kv));
  prefill_attention_kernel<HD, E><<<grid, kPrefillThreads, bytes, s>>>(q, positions, tables, tiles, kv, a, out);
}

template <kv_dtype E>
void launch_prefill_type(const float* q, const int32_t* positions, const int32_t* tables, const prefill_tile* tiles,
                         int32_t n_tiles, const kv_layer& kv, const attention_args& a, float* out, stream_handle s) {
  switch (kv.head_dim) {
    case 64:
      return launch_prefill_hd<64, E>(q, positions, tables, tiles, n_tiles, kv, a, out, s);
    case 128:
      return launch_prefill_hd<128, E>(q, positions, tables, tiles, n_tiles, kv, a, out, s);
    default:
      return launch_prefill_hd<256, E>(q, positions, tables, tiles, n_tiles, kv, a, out, s);
  }
}

}  // namespace

void launch_prefill_attention(const float* q, const int32_t* positions, const int32_t* tables,
                              const prefill_tile* tiles, int32_t n_tiles, const kv_layer& kv, const attention_args& a,
                              float* out, stream_handle s) {
  if (n_tiles <= 0) return;
  if (!prefill_attention_supported(static_cast<uint32_t>(kv.head_dim), static_cast<uint32_t>(a.n_head),
                                   static_cast<uint32_t>(kv.n_head_kv))) {
    throw cuda_error("prefill attention: needs head_dim 64, 128 or 256 and at most 64 query heads per KV head");
  }
  if (kv.n_head_kv > 65535) throw cuda_error("prefill attention: too many KV heads for the grid");
  if ((reinterpret_cast<uintptr_t>(kv.k) | reinterpret_cast<uintptr_t>(kv.v) | reinterpret_cast<uintptr_t>(q)) % 16) {
    throw cuda_error("prefill attention: q and the KV cache must be 16-byte aligned");
  }
  if (a.window < 0) throw cuda_error("prefill attention: negative window");
  if (kv.dtype == kv_dtype::fp8_e4m3) {
    launch_prefill_type<kv_dtype::fp8_e4m3>(q, positions, tables, tiles, n_tiles, kv, a, out, s);
  } else {
    launch_prefill_type<kv_dtype::f16>(q, positions, tables, tiles, n_tiles, kv, a, out, s);
  }
  check_launch("prefill_attention");
}

}  // namespace tandem::gpu
