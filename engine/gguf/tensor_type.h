// Tensor element types as GGUF numbers them (the ggml_type enum), with their block layout.
//
//   type   block  bytes/block  layout of one block
//   F32      1        4        float
//   F16      1        2        IEEE half
//   BF16     1        2        bfloat16 (upper half of a float)
//   Q4_0    32       18        f16 d | 16 bytes of nibbles          x = d * (q - 8)
//   Q4_1    32       20        f16 d | f16 m | 16 bytes of nibbles  x = d * q + m
//   Q8_0    32       34        f16 d | 32 x int8                    x = d * q
//
// In the Q4 blocks byte j holds element j in its low nibble and element j+16 in its high one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem {

enum class tensor_type : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q8_0 = 8,
  bf16 = 30,
};

struct tensor_type_traits {
  std::string_view name;  // as ggml spells it: "Q4_1"
  int64_t block_size;     // elements per block
  size_t block_bytes;     // bytes per block
};

// Traits of a supported type; nullopt for any other GGUF type number.
std::optional<tensor_type_traits> traits_of(uint32_t type_id);
tensor_type_traits traits_of(tensor_type type);

// Name of any GGUF/ggml type number, supported or not ("Q5_K", "IQ2_XS"); "type N" if unknown.
std::string ggml_type_name(uint32_t type_id);

// Parses "q4_1", "Q4_1", "f16", ... (case-insensitive). nullopt if not a supported type.
std::optional<tensor_type> parse_tensor_type(std::string_view text);

// Bytes used by a row of n elements; n must be a multiple of the block size.
size_t row_bytes(tensor_type type, int64_t n);

}  // namespace tandem
