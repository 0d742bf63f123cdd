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

// Traits of every type in the enum (the weight types and Q8_K).
std::optional<tensor_type_traits> type_traits(tensor_type type) {
  switch (type) {
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
    case tensor_type::q5_0:
      return tensor_type_traits{"Q5_0", 32, 22};
    case tensor_type::q5_1:
      return tensor_type_traits{"Q5_1", 32, 24};
    case tensor_type::q8_0:
      return tensor_type_traits{"Q8_0", 32, 34};
    case tensor_type::q2_k:
      return tensor_type_traits{"Q2_K", 256, 84};
    case tensor_type::q3_k:
      return tensor_type_traits{"Q3_K", 256, 110};
    case tensor_type::q4_k:
      return tensor_type_traits{"Q4_K", 256, 144};
    case tensor_type::q5_k:
      return tensor_type_traits{"Q5_K", 256, 176};
    case tensor_type::q6_k:
      return tensor_type_traits{"Q6_K", 256, 210};
    case tensor_type::q8_k:
      return tensor_type_traits{"Q8_K", 256, 292};
    case tensor_type::iq4_nl:
      return tensor_type_traits{"IQ4_NL", 32, 18};
    case tensor_type::iq4_xs:
      return tensor_type_traits{"IQ4_XS", 256, 136};
    case tensor_type::mxfp4:
      return tensor_type_traits{"MXFP4", 32, 17};
  }
  return std::nullopt;
}

}  // namespace

std::optional<tensor_type_traits> traits_of(uint32_t type_id) {
  if (static_cast<tensor_type>(type_id) == tensor_type::q8_k) return std::nullopt;
  return type_traits(static_cast<tensor_type>(type_id));
}

tensor_type_traits traits_of(tensor_type type) { return *type_traits(type); }

std::string ggml_type_name(uint32_t type_id) {
  if (type_id < kGgmlNames.size()) return std::string(kGgmlNames[type_id]);
  return "type " + std::to_string(type_id);
}

std::optional<tensor_type> parse_tensor_type(std::string_view text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (tensor_type t : kWeightTypes) {
    if (traits_of(t).name == upper) return t;
  }
  return std::nullopt;
}

std::string weight_type_list() {
  std::string out;
  for (tensor_type t : kWeightTypes) {
    if (!out.empty()) out += ", ";
    for (char c : traits_of(t).name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string file_type_name(int64_t file_type) {
  switch (file_type) {
    case 0:
      return "all F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K - Medium";
    case 11:
      return "Q3_K - Small";
    case 12:
      return "Q3_K - Medium";
    case 13:
      return "Q3_K - Large";
    case 14:
      return "Q4_K - Small";
    case 15:
      return "Q4_K - Medium";
    case 16:
      return "Q5_K - Small";
    case 17:
      return "Q5_K - Medium";
    case 18:
      return "Q6_K";
    case 21:
      return "Q2_K - Small";
    case 25:
      return "IQ4_NL - 4.5 bpw";
    case 30:
      return "IQ4_XS - 4.25 bpw";
    case 32:
      return "BF16";
    case 38:
      return "MXFP4 MoE";
    default:
      return "";
  }
}

size_t row_bytes(tensor_type type, int64_t n) {
  const auto tr = traits_of(type);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace tandem
