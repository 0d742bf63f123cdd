// Dot-product kernels, one table per instruction set; the best one the CPU supports is
// chosen once at run time (cpuid), and TANDEM_ISA=generic|avx2|avx512 can force a lower one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/kernels/half.h"
#include "engine/tensor_type.h"

namespace tandem::kernels {

// One weight row against up to four activation rows (in the weight type's activation
// format, see activation_format.h):
//   out[i] = sum_j w_row[j] * act_i[j],  act_i = acts + i * act_stride bytes,  i < n_acts <= 4.
// k is the row length in elements (a multiple of 32 for quantized types).
using row_dot_fn = void (*)(int64_t k, const void* w_row, const void* acts, size_t act_stride,
                            int n_acts, float* out);

inline constexpr int kMaxActsPerDot = 4;

struct dot_kernels {
  std::string_view isa;  // "generic", "avx2", "avx512"
  row_dot_fn q4_0 = nullptr;
  row_dot_fn q4_1 = nullptr;
  row_dot_fn q8_0 = nullptr;
  row_dot_fn f16 = nullptr;
  row_dot_fn bf16 = nullptr;
  row_dot_fn f32 = nullptr;
  // Attention helpers: sum a[i]*b[i] over halves, and y[i] += alpha * x[i].
  float (*dot_f16)(int64_t n, const f16_bits* a, const f16_bits* b) = nullptr;
  void (*axpy_f16)(int64_t n, float alpha, const f16_bits* x, float* y) = nullptr;

  row_dot_fn for_type(tensor_type type) const;
};

const dot_kernels& generic_dot_kernels();
const dot_kernels& avx2_dot_kernels();    // needs AVX2 + FMA + F16C
const dot_kernels& avx512_dot_kernels();  // needs AVX-512 F/BW/VL/VNNI + the AVX2 set

bool cpu_has_avx2();
bool cpu_has_avx512();

// The best supported table (honouring TANDEM_ISA); decided on first use.
const dot_kernels& best_dot_kernels();

}  // namespace tandem::kernels
