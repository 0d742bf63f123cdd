// The arithmetic of every device weight format, one 64-element chunk at a time: how a lane
// loads a chunk's bytes (16-byte loads from the planes of gpu/formats/weight_layout.h), turns
// them into floats, and dots them with an activation row (floats, or 8-bit quants with a
// scale per 32 elements). Compiled by nvcc into the kernels and by g++ into the CPU tests,
// which hold each format to engine/gguf/quantize.cpp's dequantize_row bit for bit.
//
// A chunk is 64 elements of one row, seen as two runs of 32 (run k's first element is
// run_start(c, k)); every activation block of 32 lines up with one run:
//
//   format        chunk c covers                          bytes a lane loads
//   F32/F16/BF16  elements [64c, 64c + 64)                 256 / 128 / 128
//   Q4_0 Q4_1     blocks 2c, 2c + 1                        32 quants + 2 scales (+ 2 mins)
//   Q5_0          blocks 2c, 2c + 1                        32 quants + 2 x 4 fifth bits + 2 scales
//   Q8_0          blocks 2c, 2c + 1                        64 quants + 2 scales
//   Q4_K          super-block c/4, sub-blocks 2p, 2p + 1   16 header (d, dmin, scales) + 32 quants
//                 (p = c % 4): elements 64p + [0, 64)
//   Q5_K          as Q4_K                                  16 header + 32 fifth bits + 32 quants
//   Q6_K          super-block c/4, half h = (c%4)/2,       32 low bits + 32 high bits + 16 scales
//                 p = c%2: runs g = p and g = 2 + p          + d
//                 (elements 128h + 32g + [0, 32))
//
// The integer dot products follow the activation format q8_1 of engine/kernels/blocks.h in
// spirit: x ~ d_x * q_x per run of 32, s_x = d_x * sum(q_x); a weight run w = a * q + b
// (q small integers) contributes a * d_x * sum(q * q_x) + b * s_x.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/gguf/tensor_type.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define TANDEM_FMT_HD __host__ __device__ __forceinline__
#define TANDEM_FMT_UNROLL _Pragma("unroll")
#else
#include <cmath>
#define TANDEM_FMT_HD inline
#define TANDEM_FMT_UNROLL
#endif

namespace tandem::gpu::fmt {

inline constexpr int kChunk = 64;  // elements of a row a lane takes per step
inline constexpr int kRun = 32;    // elements per activation block

struct alignas(16) u32x4 {
  uint32_t v[4];
};

// The device-side view of one matrix in its device layout: plane p of row r starts at
// plane[p] + r * row_bytes[p] (gpu/formats/weight_layout.h makes it).
struct matrix_view {
  const uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  int64_t row_bytes[3] = {0, 0, 0};
};

// One run of an activation row quantized to 8 bits: x[i] ~ d * q[i], s = d * sum(q).
struct q8_run {
  int32_t q[8];  // 32 int8 quants, four per word, little-endian
  float d, s;
};

// ---- scalar helpers (device intrinsics on the GPU, the same arithmetic on the host) ----

TANDEM_FMT_HD u32x4 load16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  // Weights stream through once per step: keep them out of L1 so activations stay there.
  u32x4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.v[0]), "=r"(r.v[1]), "=r"(r.v[2]), "=r"(r.v[3])
      : "l"(p));
  return r;
#else
  u32x4 r;
  std::memcpy(r.v, p, 16);
  return r;
#endif
}

TANDEM_FMT_HD uint16_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

TANDEM_FMT_HD uint32_t load_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

TANDEM_FMT_HD float half_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal: exact
    return sign ? -f : f;
  }
  const uint32_t bits = exp == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

TANDEM_FMT_HD float bits_to_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

TANDEM_FMT_HD float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

// sum of the four signed byte products of a and b, plus c (CUDA's __dp4a).
TANDEM_FMT_HD int32_t dp4a(int32_t a, int32_t b, int32_t c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int32_t>(static_cast<int8_t>(a >> (8 * i))) *
         static_cast<int32_t>(static_cast<int8_t>(b >> (8 * i)));
  }
  return c;
#endif
}

// Byte-wise a - b, each byte wrapping (CUDA's __vsub4): turns unsigned quants into signed
// ones (q - 8, q - 16, q - 32) four at a time.
TANDEM_FMT_HD uint32_t sub_bytes(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vsub4(a, b);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= ((((a >> (8 * i)) & 0xffu) - ((b >> (8 * i)) & 0xffu)) & 0xffu) << (8 * i);
  return r;
#endif
}

// Bits 0..3 of `bits` to bit 4 of bytes 0..3 (a 4-bit group of fifth bits into place).
TANDEM_FMT_HD uint32_t nibble_to_byte_bit4(uint32_t bits) {
  return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

// Word i / byte i of 16 loaded bytes for an index known only at run time: selects, not an
// indexed array (which would move the registers to local memory).
TANDEM_FMT_HD uint32_t word_at(const u32x4& x, int i) {
  return i == 0 ? x.v[0] : i == 1 ? x.v[1] : i == 2 ? x.v[2] : x.v[3];
}
TANDEM_FMT_HD int byte_at(const u32x4& x, int i) {
  return static_cast<int>((word_at(x, i / 4) >> (8 * (i % 4))) & 0xffu);
}

// Q4_K / Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes, which are bytes
// 4..15 of the block's first 16 (after d and dmin).
TANDEM_FMT_HD void k4_scale_min(int j, const u32x4& head, int& sc, int& m) {
  auto s = [&](int i) { return byte_at(head, 4 + i); };
  if (j < 4) {
    sc = s(j) & 63;
    m = s(j + 4) & 63;
  } else {
    sc = (s(j + 4) & 15) | ((s(j - 4) >> 6) << 4);
    m = (s(j + 4) >> 4) | ((s(j) >> 6) << 4);
  }
}

// 32 floats as a q8 run: d = max|x| / 127, q = round-to-nearest-even(x / d).
TANDEM_FMT_HD void quantize_run(const float* x, q8_run& r) {
  float amax = 0.0f;
  for (int i = 0; i < kRun; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  int32_t sum = 0;
  for (int w = 0; w < 8; ++w) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
      const int q = static_cast<int>(nearbyintf(x[4 * w + i] * id));
      sum += q;
      word |= (static_cast<uint32_t>(q) & 0xffu) << (8 * i);
    }
    r.q[w] = static_cast<int32_t>(word);
  }
  r.d = d;
  r.s = d * static_cast<float>(sum);
}

// ---- the formats ----
//
// Each format F has:
//   kIntDot              activations as q8 runs (true) or floats (false)
//   struct regs          one chunk's bytes, as loaded
//   load(v, row, c, w)   the 16-byte (and scale) loads of chunk c of row `row`
//   run_start(c, k)      index of run k's first element in the row
//   dequant(w, y)        y[32k + l] = element run_start(c, k) + l
//   dot(w, x0, x1)       sum over the chunk of weight * activation (q8 runs or float runs)

template <tensor_type T>
struct format;

// F32 / F16 / BF16: one plane of plain elements; chunks are contiguous.
template <int kBytes>
struct float_regs {
  u32x4 b[kBytes * kChunk / 16];
};

template <tensor_type T>
struct float_format {
  static constexpr bool kIntDot = false;
  static constexpr int kElemBytes = T == tensor_type::f32 ? 4 : 2;
  static constexpr int kLoadBytes = kElemBytes * kChunk;  // weight bytes a lane loads per chunk
  using regs = float_regs<kElemBytes>;
  TANDEM_FMT_HD static int64_t run_start(int64_t c, int k) { return kChunk * c + kRun * k; }
  TANDEM_FMT_HD static void load(const matrix_view& v, int64_t row, int64_t c, regs& w) {
    const uint8_t* p = v.plane[0] + row * v.row_bytes[0] + c * (kChunk * kElemBytes);
    TANDEM_FMT_UNROLL
    for (int i = 0; i < kElemBytes * kChunk / 16; ++i) w.b[i] = load16(p + 16 * i);
  }
  TANDEM_FMT_HD static float element(const regs& w, int i) {
    if constexpr (T == tensor_type::f32) {
      return bits_to_float(w.b[i / 4].v[i % 4]);
    } else {
      const uint32_t word = w.b[i / 8].v[(i % 8) / 2];
      const uint16_t h = static_cast<uint16_t>(i % 2 ? word >> 16 : word & 0xffffu);
      return T == tensor_type::f16 ? half_to_float(h) : bf16_to_float(h);
    }
  }
  TANDEM_FMT_HD static void dequant(const regs& w, float* y) {
    TANDEM_FMT_UNROLL
    for (int i = 0; i < kChunk; ++i) y[i] = element(w, i);
  }
  // x0, x1: the 32 activations of each run.
  TANDEM_FMT_HD static float dot(const regs& w, const float* x0, const float* x1) {
    float s0 = 0.0f, s1 = 0.0f;
    TANDEM_FMT_UNROLL
    for (int i = 0; i < kRun; ++i) {
      s0 += element(w, i) * x0[i];
      s1 += element(w, kRun + i) * x1[i];
    }
    return s0 + s1;
  }
};

template <>
struct format<tensor_type::f32> : float_format<tensor_type::f32> {};
template <>
struct format<tensor_type::f16> : float_format<tensor_type::f16> {};
template <>
struct format<tensor_type::bf16> : float_format<tensor_type::bf16> {};

// Q4_0, Q4_1, Q5_0, Q8_0: planes [quants][...]; chunk c is blocks 2c and 2c + 1.
// In the 4-bit quants, byte j of a block holds element j (low nibble) and j + 16 (high).
struct block32_regs {
  u32x4 q[4];      // Q8_0: 64 quants; 4- and 5-bit formats use q[0..1] (32 bytes)
  uint32_t hi[2];  // Q5_0: the fifth bits of each block
  uint16_t d[2], m[2];
};

// Words 4b..4b+3 of block b's 16 nibble bytes, split: lo[i] = elements 4i..4i+3 of the
// block (low nibbles), hi[i] = elements 16 + 4i.. (high nibbles).
TANDEM_FMT_HD void split_nibbles(const u32x4& q, uint32_t lo[4], uint32_t hi[4]) {
  TANDEM_FMT_UNROLL
  for (int i = 0; i < 4; ++i) {
    lo[i] = q.v[i] & 0x0f0f0f0fu;
    hi[i] = (q.v[i] >> 4) & 0x0f0f0f0fu;
  }
}

template <tensor_type T>
struct block32_format {
  static constexpr bool kIntDot = true;
  using regs = block32_regs;
  static constexpr int kQuantBytes = T == tensor_type::q8_0 ? 32 : 16;
  static constexpr int kLoadBytes = 2 * kQuantBytes + (T == tensor_type::q5_0 ? 12 : T == tensor_type::q4_1 ? 8 : 4);
  TANDEM_FMT_HD static int64_t run_start(int64_t c, int k) { return kChunk * c + kRun * k; }
  TANDEM_FMT_HD static void load(const matrix_view& v, int64_t row, int64_t c, regs& w) {
    const uint8_t* q = v.plane[0] + row * v.row_bytes[0] + c * (2 * kQuantBytes);
    TANDEM_FMT_UNROLL
    for (int i = 0; i < 2 * kQuantBytes / 16; ++i) w.q[i] = load16(q + 16 * i);
    if constexpr (T == tensor_type::q5_0) {
      const uint8_t* h = v.plane[1] + row * v.row_bytes[1] + c * 8;
      w.hi[0] = load_u32(h), w.hi[1] = load_u32(h + 4);
      const uint8_t* d = v.plane[2] + row * v.row_bytes[2] + c * 4;
      w.d[0] = load_u16(d), w.d[1] = load_u16(d + 2);
    } else if constexpr (T == tensor_type::q4_1) {
      const uint8_t* dm = v.plane[1] + row * v.row_bytes[1] + c * 8;
      w.d[0] = load_u16(dm), w.m[0] = load_u16(dm + 2), w.d[1] = load_u16(dm + 4), w.m[1] = load_u16(dm + 6);
    } else {
      const uint8_t* d = v.plane[1] + row * v.row_bytes[1] + c * 4;
      w.d[0] = load_u16(d), w.d[1] = load_u16(d + 2);
    }
  }
  // The 8 words of block b's quants in element order, as the signed value the scale
  // multiplies (q - 8 for Q4_0, q - 16 for Q5_0, q for Q4_1 and Q8_0).
  TANDEM_FMT_HD static void quants(const regs& w, int b, int32_t out[8]) {
    if constexpr (T == tensor_type::q8_0) {
      TANDEM_FMT_UNROLL
      for (int i = 0; i < 8; ++i) out[i] = static_cast<int32_t>(w.q[2 * b + i / 4].v[i % 4]);
    } else {
      uint32_t lo[4], hi[4];
      split_nibbles(w.q[b], lo, hi);
      TANDEM_FMT_UNROLL
      for (int i = 0; i < 4; ++i) {
        if constexpr (T == tensor_type::q4_0) {
          lo[i] = sub_bytes(lo[i], 0x08080808u), hi[i] = sub_bytes(hi[i], 0x08080808u);
        } else if constexpr (T == tensor_type::q5_0) {
          lo[i] = sub_bytes(lo[i] | nibble_to_byte_bit4(w.hi[b] >> (4 * i)), 0x10101010u);
          hi[i] = sub_bytes(hi[i] | nibble_to_byte_bit4(w.hi[b] >> (16 + 4 * i)), 0x10101010u);
        }
        out[i] = static_cast<int32_t>(lo[i]);
        out[4 + i] = static_cast<int32_t>(hi[i]);
      }
    }
  }
  TANDEM_FMT_HD static void dequant(const regs& w, float* y) {
    TANDEM_FMT_UNROLL
    for (int b = 0; b < 2; ++b) {
      int32_t q[8];
      quants(w, b, q);
      const float d = half_to_float(w.d[b]);
      const float m = T == tensor_type::q4_1 ? half_to_float(w.m[b]) : 0.0f;
      TANDEM_FMT_UNROLL
      for (int i = 0; i < kRun; ++i) {
        const float qi = static_cast<float>(static_cast<int8_t>(q[i / 4] >> (8 * (i % 4))));
        y[kRun * b + i] = T == tensor_type::q4_1 ? d * qi + m : d * qi;
      }
    }
  }
  TANDEM_FMT_HD static float dot(const regs& w, const q8_run& x0, const q8_run& x1) {
    float sum = 0.0f;
    TANDEM_FMT_UNROLL
    for (int b = 0; b < 2; ++b) {
      const q8_run& x = b == 0 ? x0 : x1;
      int32_t q[8];
      quants(w, b, q);
      int32_t s = 0;
      TANDEM_FMT_UNROLL
      for (int i = 0; i < 8; ++i) s = dp4a(q[i], x.q[i], s);
      sum += half_to_float(w.d[b]) * x.d * static_cast<float>(s);
      if constexpr (T == tensor_type::q4_1) sum += half_to_float(w.m[b]) * x.s;
    }
    return sum;
  }
};

template <>
struct format<tensor_type::q4_0> : block32_format<tensor_type::q4_0> {};
template <>
struct format<tensor_type::q4_1> : block32_format<tensor_type::q4_1> {};
template <>
struct format<tensor_type::q5_0> : block32_format<tensor_type::q5_0> {};
template <>
struct format<tensor_type::q8_0> : block32_format<tensor_type::q8_0> {};

// Q4_K and Q5_K: ggml's own 144- and 176-byte blocks (multiples of 16, so rows stay aligned):
//   [d | dmin | scales[12]] [Q5_K: qh[32]] [qs[128]]
// Chunk c = (super-block c / 4, pair p = c % 4): sub-block 2p in the low nibbles of
// qs[32p .. 32p + 32), sub-block 2p + 1 in their high nibbles; Q5_K's fifth bit of element
// 32j + l is bit j of qh[l].
struct k4_regs {
  u32x4 head;  // d, dmin, scales[12]
  u32x4 q[2];  // qs[32p .. 32p + 32)
  u32x4 h[2];  // Q5_K: qh[0 .. 32)
};

template <tensor_type T>
struct k4_format {
  static constexpr bool kIntDot = true;
  using regs = k4_regs;
  static constexpr int kBlockBytes = T == tensor_type::q5_k ? 176 : 144;
  static constexpr int kQsOffset = T == tensor_type::q5_k ? 48 : 16;
  static constexpr int kLoadBytes = T == tensor_type::q5_k ? 80 : 48;
  TANDEM_FMT_HD static int64_t run_start(int64_t c, int k) { return kChunk * c + kRun * k; }
  TANDEM_FMT_HD static void load(const matrix_view& v, int64_t row, int64_t c, regs& w) {
    const uint8_t* b = v.plane[0] + row * v.row_bytes[0] + (c / 4) * kBlockBytes;
    const int p = static_cast<int>(c % 4);
    w.head = load16(b);
    w.q[0] = load16(b + kQsOffset + 32 * p);
    w.q[1] = load16(b + kQsOffset + 32 * p + 16);
    if constexpr (T == tensor_type::q5_k) w.h[0] = load16(b + 16), w.h[1] = load16(b + 32);
  }
  // Sub-block 2p + k's quants (0..15 or 0..31) in element order, and its scale and min.
  TANDEM_FMT_HD static void quants(const regs& w, int p, int k, int32_t out[8], int& sc, int& m) {
    TANDEM_FMT_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = w.q[i / 4].v[i % 4];
      uint32_t q = k == 0 ? word & 0x0f0f0f0fu : (word >> 4) & 0x0f0f0f0fu;
      if constexpr (T == tensor_type::q5_k) q |= ((w.h[i / 4].v[i % 4] >> (2 * p + k)) & 0x01010101u) << 4;
      out[i] = static_cast<int32_t>(q);
    }
    k4_scale_min(2 * p + k, w.head, sc, m);
  }
  TANDEM_FMT_HD static void dequant_chunk(const regs& w, int p, float* y) {
    const float d = half_to_float(static_cast<uint16_t>(w.head.v[0] & 0xffffu));
    const float dmin = half_to_float(static_cast<uint16_t>(w.head.v[0] >> 16));
    TANDEM_FMT_UNROLL
    for (int k = 0; k < 2; ++k) {
      int32_t q[8];
      int sc, m;
      quants(w, p, k, q, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      TANDEM_FMT_UNROLL
      for (int i = 0; i < kRun; ++i) y[kRun * k + i] = dl * static_cast<float>((q[i / 4] >> (8 * (i % 4))) & 0xff) - ml;
    }
  }
  TANDEM_FMT_HD static float dot_chunk(const regs& w, int p, const q8_run& x0, const q8_run& x1) {
    const float d = half_to_float(static_cast<uint16_t>(w.head.v[0] & 0xffffu));
    const float dmin = half_to_float(static_cast<uint16_t>(w.head.v[0] >> 16));
    float sum = 0.0f;
    TANDEM_FMT_UNROLL
    for (int k = 0; k < 2; ++k) {
      const q8_run& x = k == 0 ? x0 : x1;
      int32_t q[8];
      int sc, m;
      quants(w, p, k, q, sc, m);
      int32_t s = 0;
      TANDEM_FMT_UNROLL
      for (int i = 0; i < 8; ++i) s = dp4a(q[i], x.q[i], s);
      sum += d * static_cast<float>(sc) * x.d * static_cast<float>(s) - dmin * static_cast<float>(m) * x.s;
    }
    return sum;
  }
};

template <>
struct format<tensor_type::q4_k> : k4_format<tensor_type::q4_k> {};
template <>
struct format<tensor_type::q5_k> : k4_format<tensor_type::q5_k> {};

// Q6_K: planes [ql[128] | qh[64] | scales[16]] (208 bytes) and [d] (2 bytes) per super-block.
// Element 128h + 32g + l (g = 0..3, l = 0..31): 4 low bits in ql[64h + 32(g % 2) + l]
// (low nibble for g < 2, high for g >= 2), 2 high bits at bit 2g of qh[32h + l], scale
// scales[8h + 2g + l / 16], value d * scale * (q - 32). Chunk c = (super-block c / 4,
// h = (c % 4) / 2, p = c % 2) holds runs g = p and g = 2 + p.
struct q6k_regs {
  u32x4 ql[2], qh[2], sc;
  uint16_t d;
};

struct q6k_format {
  static constexpr bool kIntDot = true;
  static constexpr int kLoadBytes = 82;
  using regs = q6k_regs;
  TANDEM_FMT_HD static int64_t run_start(int64_t c, int k) {
    const int64_t h = (c % 4) / 2, p = c % 2;
    return 256 * (c / 4) + 128 * h + 32 * (p + 2 * k);
  }
  TANDEM_FMT_HD static void load(const matrix_view& v, int64_t row, int64_t c, regs& w) {
    const uint8_t* b = v.plane[0] + row * v.row_bytes[0] + (c / 4) * 208;
    const int h = static_cast<int>((c % 4) / 2), p = static_cast<int>(c % 2);
    w.ql[0] = load16(b + 64 * h + 32 * p);
    w.ql[1] = load16(b + 64 * h + 32 * p + 16);
    w.qh[0] = load16(b + 128 + 32 * h);
    w.qh[1] = load16(b + 128 + 32 * h + 16);
    w.sc = load16(b + 192);
    w.d = load_u16(v.plane[1] + row * v.row_bytes[1] + (c / 4) * 2);
  }
  // Run g = p + 2k's quants minus 32 (signed bytes), element order.
  TANDEM_FMT_HD static void quants(const regs& w, int p, int k, int32_t out[8]) {
    const int g = p + 2 * k;
    TANDEM_FMT_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint32_t l4 = k == 0 ? w.ql[i / 4].v[i % 4] & 0x0f0f0f0fu : (w.ql[i / 4].v[i % 4] >> 4) & 0x0f0f0f0fu;
      const uint32_t h2 = (w.qh[i / 4].v[i % 4] >> (2 * g)) & 0x03030303u;
      out[i] = static_cast<int32_t>(sub_bytes(l4 | (h2 << 4), 0x20202020u));
    }
  }
  // scales[8h + 2g + half] as a signed integer.
  TANDEM_FMT_HD static int scale(const regs& w, int h, int g, int half) {
    return static_cast<int8_t>(byte_at(w.sc, 8 * h + 2 * g + half));
  }
  TANDEM_FMT_HD static void dequant_chunk(const regs& w, int64_t c, float* y) {
    const int h = static_cast<int>((c % 4) / 2), p = static_cast<int>(c % 2);
    const float d = half_to_float(w.d);
    TANDEM_FMT_UNROLL
    for (int k = 0; k < 2; ++k) {
      int32_t q[8];
      quants(w, p, k, q);
      TANDEM_FMT_UNROLL
      for (int i = 0; i < kRun; ++i) {
        const float qi = static_cast<float>(static_cast<int8_t>(q[i / 4] >> (8 * (i % 4))));
        y[kRun * k + i] = d * static_cast<float>(scale(w, h, p + 2 * k, i / 16)) * qi;
      }
    }
  }
  // Each run has two scales (one per 16 elements), so its activations' sum splits in two.
  TANDEM_FMT_HD static float dot_chunk(const regs& w, int64_t c, const q8_run& x0, const q8_run& x1) {
    const int h = static_cast<int>((c % 4) / 2), p = static_cast<int>(c % 2);
    float sum = 0.0f;
    TANDEM_FMT_UNROLL
    for (int k = 0; k < 2; ++k) {
      const q8_run& x = k == 0 ? x0 : x1;
      int32_t q[8];
      quants(w, p, k, q);
      int32_t s0 = 0, s1 = 0;
      TANDEM_FMT_UNROLL
      for (int i = 0; i < 4; ++i) s0 = dp4a(q[i], x.q[i], s0), s1 = dp4a(q[4 + i], x.q[4 + i], s1);
      const int g = p + 2 * k;
      sum += x.d * static_cast<float>(scale(w, h, g, 0) * s0 + scale(w, h, g, 1) * s1);
    }
    return half_to_float(w.d) * sum;
  }
};

template <>
struct format<tensor_type::q6_k> : q6k_format {};

// Uniform entry points over every format (the K-quants need the chunk index).
template <tensor_type T>
TANDEM_FMT_HD void dequant(const typename format<T>::regs& w, int64_t c, float* y) {
  if constexpr (T == tensor_type::q4_k || T == tensor_type::q5_k) {
    format<T>::dequant_chunk(w, static_cast<int>(c % 4), y);
  } else if constexpr (T == tensor_type::q6_k) {
    format<T>::dequant_chunk(w, c, y);
  } else {
    format<T>::dequant(w, y);
  }
}

template <tensor_type T>
TANDEM_FMT_HD float dot_q8(const typename format<T>::regs& w, int64_t c, const q8_run& x0, const q8_run& x1) {
  if constexpr (T == tensor_type::q4_k || T == tensor_type::q5_k) {
    return format<T>::dot_chunk(w, static_cast<int>(c % 4), x0, x1);
  } else if constexpr (T == tensor_type::q6_k) {
    return format<T>::dot_chunk(w, c, x0, x1);
  } else {
    return format<T>::dot(w, x0, x1);
  }
}

}  // namespace tandem::gpu::fmt

namespace tandem::gpu::fmt {

// Calls fn(std::integral_constant<tensor_type, T>{}) for the device format of `type`;
// false when the type has none (the launchers' switch over formats, written once).
template <class Fn>
bool with_format(tensor_type type, Fn&& fn) {
  switch (type) {
#define TANDEM_FORMAT_CASE(T)                     \
  case T:                                         \
    fn(std::integral_constant<tensor_type, T>{}); \
    return true;
    TANDEM_FORMAT_CASE(tensor_type::f32)
    TANDEM_FORMAT_CASE(tensor_type::f16)
    TANDEM_FORMAT_CASE(tensor_type::bf16)
    TANDEM_FORMAT_CASE(tensor_type::q4_0)
    TANDEM_FORMAT_CASE(tensor_type::q4_1)
    TANDEM_FORMAT_CASE(tensor_type::q5_0)
    TANDEM_FORMAT_CASE(tensor_type::q8_0)
    TANDEM_FORMAT_CASE(tensor_type::q4_k)
    TANDEM_FORMAT_CASE(tensor_type::q5_k)
    TANDEM_FORMAT_CASE(tensor_type::q6_k)
#undef TANDEM_FORMAT_CASE
    default:
      return false;
  }
}

}  // namespace tandem::gpu::fmt
