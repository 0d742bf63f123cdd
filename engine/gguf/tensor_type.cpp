#include "engine/gguf/tensor_type.h"

#include <array>
#include <cctype>

namespace tandem {
namespace {

// Names of every ggml type number (supported or not), so errors can say what they saw.
constexpr std::array<std::string_view, 42> kGgmlNames = {
    "F32",        "F16",        "Q4_0",       "Q4_1",  "Q4_2",     "Q4_3",     "Q5_0",     "Q5_1",    "Q8_0",
    "Q8_1",       "Q2_K",       "Q3_K",       "Q4_K",  "Q5_K",     "Q6_K",     "Q8_K",     "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS",    "IQ1_S",      "IQ4_NL",     "IQ3_S", "IQ2_S",    "IQ4_XS",   "I8",       "I16",     "I32",
    "I64",        "F64",        "IQ1_M",      "BF16",  "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0",
    "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", "NVFP4",    "Q1_0",
};

}  // namespace

std::optional<tensor_type_traits> traits_of(uint32_t type_id) {
  switch (static_cast<tensor_type>(type_id)) {
    case tensor_type::f32:
      return tensor_type_traits{"F32", 1, 4};
    case tensor_type::f16:
      return tensor_type_traits{"F16", 1, 2};
    case tensor_type::bf16:
      return tensor_type_traits{"BF16", 1, 2};
    case tensor_type::q4_0:
      return tensor_type_traits{"Q4_0", 32, 18};
    case tensor_type::q4_1:
      return tensor_type_traits{"Q4_1", 32, 20};
    case tensor_type::q8_0:
      return tensor_type_traits{"Q8_0", 32, 34};
  }
  return std::nullopt;
}

tensor_type_traits traits_of(tensor_type type) { return *traits_of(static_cast<uint32_t>(type)); }

std::string ggml_type_name(uint32_t type_id) {
  if (type_id < kGgmlNames.size()) return std::string(kGgmlNames[type_id]);
  return "type " + std::to_string(type_id);
}

std::optional<tensor_type> parse_tensor_type(std::string_view text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (tensor_type t : {tensor_type::f32, tensor_type::f16, tensor_type::bf16, tensor_type::q4_0, tensor_type::q4_1,
                        tensor_type::q8_0}) {
    if (traits_of(t).name == upper) return t;
  }
  return std::nullopt;
}

size_t row_bytes(tensor_type type, int64_t n) {
  const auto tr = traits_of(type);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace tandem
