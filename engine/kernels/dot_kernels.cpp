#include "engine/kernels/dot_kernels.h"

#include <stdexcept>

namespace tandem::kernels {

type_table make_type_table(std::span<const type_rows> rows, std::initializer_list<type_entry> others) {
  type_table table{};
  std::array<bool, kTypeSlots> listed{}, has_others{};
  for (const type_rows& r : rows) {
    const auto slot = static_cast<size_t>(r.type);
    if (listed[slot]) throw std::logic_error("make_type_table: a type's row kernels listed twice");
    listed[slot] = true;
    table[slot].ordinary.row = r.row;
    table[slot].large.row = r.large;
  }
  for (const type_entry& e : others) {
    const auto slot = static_cast<size_t>(e.type);
    if (has_others[slot]) throw std::logic_error("make_type_table: a type's kernels listed twice");
    if (e.kernels.ordinary.row != nullptr || e.kernels.large.row != nullptr) {
      throw std::logic_error("make_type_table: row kernels belong in the rows list");
    }
    has_others[slot] = true;
    type_kernels& k = table[slot];
    const row_dot_fn row = k.ordinary.row, large_row = k.large.row;
    k = e.kernels;
    k.ordinary.row = row;
    k.large.row = large_row;
  }
  return table;
}

void dot_kernels::convert_activation(activation_format format, const float* x, void* dst, int64_t k) const {
  if (format == activation_format::q8_0 || format == activation_format::q8_1) {
    quantize_q8(x, dst, k, format == activation_format::q8_1);
  } else if (format == activation_format::q8_k && quantize_q8_k != nullptr) {
    quantize_q8_k(x, dst, k);
  } else {
    convert_activation_row(format, x, dst, k);
  }
}

int64_t dot_kernels::large_order_tokens(tensor_type type, int64_t step_tokens, large_step_rule rule) {
  switch (type) {
    case tensor_type::q4_k:
      if (rule == large_step_rule::expert) return 0;
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

const dot_kernels& dot_kernels_for(isa_level level) {
  switch (level) {
    case isa_level::avx512:
      return avx512_dot_kernels();
    case isa_level::avx512f:
    case isa_level::avx2:
      return avx2_dot_kernels();
    case isa_level::generic:
      break;
  }
  return generic_dot_kernels();
}

const dot_kernels& best_dot_kernels() {
  static const dot_kernels& chosen = dot_kernels_for(kernel_isa());
  return chosen;
}

}  // namespace tandem::kernels
