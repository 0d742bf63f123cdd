// The row kernels of every weight type and the activation conversions, compiled once per
// SIMD table: the AVX2 and AVX-512 table files each include this once (after
// dot_simd_body.inl and dot_simd_quants.inl, inside their anonymous namespace) and list
// kSimdRows in their table.

// A row_dot_fn from a kernel template over the token count: BODY(N) for N = 1..4.
#define TANDEM_DISPATCH_ROWS(NAME, BODY)                                                          \
  void NAME(int64_t k, const void* w_row, const void* acts_v, size_t stride, int n, float* out) { \
    const auto* acts = static_cast<const std::byte*>(acts_v);                                     \
    switch (n) {                                                                                  \
      case 1:                                                                                     \
        BODY(1);                                                                                  \
        break;                                                                                    \
      case 2:                                                                                     \
        BODY(2);                                                                                  \
        break;                                                                                    \
      case 3:                                                                                     \
        BODY(3);                                                                                  \
        break;                                                                                    \
      default:                                                                                    \
        BODY(4);                                                                                  \
        break;                                                                                    \
    }                                                                                             \
  }

#define TANDEM_Q4_0(N) repacked_rows<N>(k, static_cast<const block_q4_0*>(w_row), acts, stride, out)
#define TANDEM_MXFP4(N) repacked_rows<N>(k, static_cast<const block_mxfp4*>(w_row), acts, stride, out)
#define TANDEM_Q4_1(N) q4_1_rows<N>(k, static_cast<const block_q4_1*>(w_row), acts, stride, out)
#define TANDEM_Q8_0(N) q8_0_rows<N>(k, static_cast<const block_q8_0*>(w_row), acts, stride, out)
#define TANDEM_F16(N)                                                                  \
  float_rows<N>(k, static_cast<const f16_bits*>(w_row), acts, stride, out, load_f16x8, \
                [](f16_bits h) { return f16_to_f32(h); })
#define TANDEM_BF16(N)                                                                   \
  float_rows<N>(k, static_cast<const bf16_bits*>(w_row), acts, stride, out, load_bf16x8, \
                [](bf16_bits h) { return bf16_to_f32(h); })
#define TANDEM_F32(N)                                                                                            \
  float_rows<N>(                                                                                                 \
      k, static_cast<const float*>(w_row), acts, stride, out, [](const float* p) { return _mm256_loadu_ps(p); }, \
      [](float f) { return f; })

TANDEM_DISPATCH_ROWS(dot_q4_0, TANDEM_Q4_0)
TANDEM_DISPATCH_ROWS(dot_mxfp4, TANDEM_MXFP4)
TANDEM_DISPATCH_ROWS(dot_q4_1, TANDEM_Q4_1)
TANDEM_DISPATCH_ROWS(dot_q8_0, TANDEM_Q8_0)
TANDEM_DISPATCH_ROWS(dot_f16, TANDEM_F16)
TANDEM_DISPATCH_ROWS(dot_bf16, TANDEM_BF16)
TANDEM_DISPATCH_ROWS(dot_f32, TANDEM_F32)

#undef TANDEM_Q4_0
#undef TANDEM_MXFP4
#undef TANDEM_Q4_1
#undef TANDEM_Q8_0
#undef TANDEM_F16
#undef TANDEM_BF16
#undef TANDEM_F32

#define TANDEM_Q5_0(N) q5_0_rows<N>(k, static_cast<const block_q5_0*>(w_row), acts, stride, out)
#define TANDEM_Q5_1(N) q5_1_rows<N>(k, static_cast<const block_q5_1*>(w_row), acts, stride, out)
#define TANDEM_IQ4_NL(N) iq4_nl_rows<N>(k, static_cast<const block_iq4_nl*>(w_row), acts, stride, out)
#define TANDEM_Q2_K(N) q2_k_rows<N, false>(k, static_cast<const block_q2_k*>(w_row), acts, stride, out)
#define TANDEM_Q3_K(N) q3_k_rows<N, false>(k, static_cast<const block_q3_k*>(w_row), acts, stride, out)
#define TANDEM_Q4_K(N) q4_k_rows<N, false>(k, static_cast<const block_q4_k*>(w_row), acts, stride, out)
#define TANDEM_Q5_K(N) k4_rows<N, true>(k, static_cast<const block_q5_k*>(w_row), acts, stride, out)
#define TANDEM_Q6_K(N) q6_k_rows<N, false>(k, static_cast<const block_q6_k*>(w_row), acts, stride, out)
#define TANDEM_IQ4_XS(N) iq4_xs_rows<N, false>(k, static_cast<const block_iq4_xs*>(w_row), acts, stride, out)
#define TANDEM_Q2_K_L(N) q2_k_rows<N, true>(k, static_cast<const block_q2_k*>(w_row), acts, stride, out)
#define TANDEM_Q3_K_L(N) q3_k_rows<N, true>(k, static_cast<const block_q3_k*>(w_row), acts, stride, out)
#define TANDEM_Q4_K_L(N) q4_k_rows<N, true>(k, static_cast<const block_q4_k*>(w_row), acts, stride, out)
#define TANDEM_Q5_K_L(N) k4_rows<N, true, block_q5_k, true>(k, static_cast<const block_q5_k*>(w_row), acts, stride, out)
#define TANDEM_Q6_K_L(N) q6_k_rows<N, true>(k, static_cast<const block_q6_k*>(w_row), acts, stride, out)
#define TANDEM_IQ4_XS_L(N) iq4_xs_rows<N, true>(k, static_cast<const block_iq4_xs*>(w_row), acts, stride, out)
TANDEM_DISPATCH_ROWS(dot_q5_0, TANDEM_Q5_0)
TANDEM_DISPATCH_ROWS(dot_q5_1, TANDEM_Q5_1)
TANDEM_DISPATCH_ROWS(dot_iq4_nl, TANDEM_IQ4_NL)
TANDEM_DISPATCH_ROWS(dot_q2_k, TANDEM_Q2_K)
TANDEM_DISPATCH_ROWS(dot_q3_k, TANDEM_Q3_K)
TANDEM_DISPATCH_ROWS(dot_q4_k, TANDEM_Q4_K)
TANDEM_DISPATCH_ROWS(dot_q5_k, TANDEM_Q5_K)
TANDEM_DISPATCH_ROWS(dot_q6_k, TANDEM_Q6_K)
TANDEM_DISPATCH_ROWS(dot_iq4_xs, TANDEM_IQ4_XS)
TANDEM_DISPATCH_ROWS(dot_q2_k_large, TANDEM_Q2_K_L)
TANDEM_DISPATCH_ROWS(dot_q3_k_large, TANDEM_Q3_K_L)
TANDEM_DISPATCH_ROWS(dot_q4_k_large, TANDEM_Q4_K_L)
TANDEM_DISPATCH_ROWS(dot_q5_k_large, TANDEM_Q5_K_L)
TANDEM_DISPATCH_ROWS(dot_q6_k_large, TANDEM_Q6_K_L)
TANDEM_DISPATCH_ROWS(dot_iq4_xs_large, TANDEM_IQ4_XS_L)
#undef TANDEM_Q5_0
#undef TANDEM_Q5_1
#undef TANDEM_IQ4_NL
#undef TANDEM_Q2_K
#undef TANDEM_Q3_K
#undef TANDEM_Q4_K
#undef TANDEM_Q5_K
#undef TANDEM_Q6_K
#undef TANDEM_IQ4_XS
#undef TANDEM_Q2_K_L
#undef TANDEM_Q3_K_L
#undef TANDEM_Q4_K_L
#undef TANDEM_Q5_K_L
#undef TANDEM_Q6_K_L
#undef TANDEM_IQ4_XS_L
#undef TANDEM_DISPATCH_ROWS

// Q8 quantization of a row, as convert_activation_row does it (same bits): per block
// amax, d = amax / 127, q = round-half-even(x * (127 / amax)), s = d * sum(q).
void quantize_q8(const float* x, void* dst, int64_t k, bool with_sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* v = x + b * kBlock;
    __m256 q[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_loadu_ps(v + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, q[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float max_abs = _mm_cvtss_f32(m4);
    const float d = max_abs / 127.0f;
    const __m256 id = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
    __m256i ints[4];
    __m256i sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      ints[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(q[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      sum = _mm256_add_epi32(sum, ints[i]);
    }
    // int32 -> int8 in element order (the packs work within 128-bit lanes; fix with a permute)
    const __m256i w01 = _mm256_packs_epi32(ints[0], ints[1]);
    const __m256i w23 = _mm256_packs_epi32(ints[2], ints[3]);
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (with_sum) {
      auto& out = static_cast<block_q8_1*>(dst)[b];
      __m128i s4 = _mm_add_epi32(_mm256_extracti128_si256(sum, 1), _mm256_castsi256_si128(sum));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      out.d = f32_to_f16(d);
      out.s = f32_to_f16(d * static_cast<float>(_mm_cvtsi128_si32(s4)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs), bytes);
    } else {
      auto& out = static_cast<block_q8_0*>(dst)[b];
      out.d = f32_to_f16(d);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs), bytes);
    }
  }
}

void to_f16(int64_t n, const float* x, f16_bits* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

// Every weight type's row kernels, in the ordinary and the large-step order.
constexpr type_rows kSimdRows[] = {
    {tensor_type::f32, dot_f32},
    {tensor_type::f16, dot_f16},
    {tensor_type::bf16, dot_bf16},
    {tensor_type::q4_0, dot_q4_0},
    {tensor_type::q4_1, dot_q4_1},
    {tensor_type::q5_0, dot_q5_0},
    {tensor_type::q5_1, dot_q5_1},
    {tensor_type::q8_0, dot_q8_0},
    {tensor_type::iq4_nl, dot_iq4_nl},
    {tensor_type::q2_k, dot_q2_k, dot_q2_k_large},
    {tensor_type::q3_k, dot_q3_k, dot_q3_k_large},
    {tensor_type::q4_k, dot_q4_k, dot_q4_k_large},
    {tensor_type::q5_k, dot_q5_k, dot_q5_k_large},
    {tensor_type::q6_k, dot_q6_k, dot_q6_k_large},
    {tensor_type::iq4_xs, dot_iq4_xs, dot_iq4_xs_large},
    {tensor_type::mxfp4, dot_mxfp4},
};
