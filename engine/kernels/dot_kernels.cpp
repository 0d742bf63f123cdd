#include "engine/kernels/dot_kernels.h"

#include <cstdlib>
#include <string>

namespace tandem::kernels {

void dot_kernels::convert_activation(activation_format format, const float* x, void* dst, int64_t k) const {
  if (format == activation_format::q8_0 || format == activation_format::q8_1) {
    quantize_q8(x, dst, k, format == activation_format::q8_1);
  } else if (format == activation_format::q8_k && quantize_q8_k != nullptr) {
    quantize_q8_k(x, dst, k);
  } else {
    convert_activation_row(format, x, dst, k);
  }
}

row_dot_fn dot_kernels::for_type(tensor_type type) const {
  if (const row_dot_fn own = own_for_type(type)) return own;
  return this == &generic_dot_kernels() ? nullptr : generic_dot_kernels().own_for_type(type);
}

row_dot_fn dot_kernels::own_for_type(tensor_type type) const {
  switch (type) {
    case tensor_type::q4_0:
      return q4_0;
    case tensor_type::q4_1:
      return q4_1;
    case tensor_type::q8_0:
      return q8_0;
    case tensor_type::f16:
      return f16;
    case tensor_type::bf16:
      return bf16;
    case tensor_type::f32:
      return f32;
    case tensor_type::q5_0:
      return q5_0;
    case tensor_type::q5_1:
      return q5_1;
    case tensor_type::iq4_nl:
      return iq4_nl;
    case tensor_type::q2_k:
      return q2_k;
    case tensor_type::q3_k:
      return q3_k;
    case tensor_type::q4_k:
      return q4_k;
    case tensor_type::q5_k:
      return q5_k;
    case tensor_type::q6_k:
      return q6_k;
    case tensor_type::iq4_xs:
      return iq4_xs;
    case tensor_type::q8_k:
      return nullptr;
  }
  return nullptr;
}

int64_t dot_kernels::large_order_tokens(tensor_type type, int64_t step_tokens) {
  switch (type) {
    case tensor_type::q4_k:
      return step_tokens >= 4 ? step_tokens - step_tokens % 4 : 0;
    case tensor_type::q2_k:
    case tensor_type::q3_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
    case tensor_type::iq4_xs:
      return step_tokens >= kLargeStepTokens ? step_tokens : 0;
    default:
      return 0;
  }
}

row_dot_fn dot_kernels::own_large_for_type(tensor_type type) const {
  switch (type) {
    case tensor_type::q2_k:
      return q2_k_large;
    case tensor_type::q3_k:
      return q3_k_large;
    case tensor_type::q4_k:
      return q4_k_large;
    case tensor_type::q5_k:
      return q5_k_large;
    case tensor_type::q6_k:
      return q6_k_large;
    case tensor_type::iq4_xs:
      return iq4_xs_large;
    default:
      return nullptr;
  }
}

row_dot_fn dot_kernels::large_for_type(tensor_type type) const {
  if (const row_dot_fn own = own_large_for_type(type)) return own;
  return generic_dot_kernels().own_large_for_type(type);
}

group_dot_fn dot_kernels::group_for_type(tensor_type type) const {
  switch (type) {
    case tensor_type::q4_0:
      return q4_0_x4;
    case tensor_type::q4_1:
      return q4_1_x4;
    case tensor_type::q8_0:
      return q8_0_x4;
    case tensor_type::q5_0:
      return q5_0_x4;
    default:
      return nullptr;
  }
}

group_rows4x2_fn dot_kernels::group8_for_type(tensor_type type) const {
  switch (type) {
    case tensor_type::q4_1:
      return q4_1_x8_r4;
    case tensor_type::q8_0:
      return q8_0_x8_r4;
    case tensor_type::q5_0:
      return q5_0_x8_r4;
    default:
      return nullptr;
  }
}

group_dot_fn dot_kernels::group_for_order(tensor_type type, bool large) const {
  if (!large) return group_for_type(type);
  return type == tensor_type::q6_k ? q6_k_x4_large : nullptr;
}

group_rows4x2_fn dot_kernels::group8_for_order(tensor_type type, bool large) const {
  if (!large) return group8_for_type(type);
  return type == tensor_type::q6_k ? q6_k_x8_r4_large : nullptr;
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

const dot_kernels& best_dot_kernels() {
  static const dot_kernels& chosen = []() -> const dot_kernels& {
    const char* forced = std::getenv("TANDEM_ISA");
    const std::string want = forced ? forced : "";
    if (want == "generic") return generic_dot_kernels();
    if (cpu_has_avx512() && want != "avx2") return avx512_dot_kernels();
    if (cpu_has_avx2()) return avx2_dot_kernels();
    return generic_dot_kernels();
  }();
  return chosen;
}

}  // namespace tandem::kernels
