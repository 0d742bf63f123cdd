// Tensor element types as GGUF numbers them (the ggml_type enum), with their block layout.
//
//   type    block  bytes  layout of one block (engine/kernels/blocks.h has them as structs)
//   F32       1      4    float
//   F16       1      2    IEEE half
//   BF16      1      2    bfloat16 (upper half of a float)
//   Q4_0     32     18    f16 d | qs[16] nibbles                         x = d * (q - 8)
//   Q4_1     32     20    f16 d | f16 m | qs[16]                         x = d * q + m
//   Q5_0     32     22    f16 d | qh[4] fifth bits | qs[16]              x = d * (q - 16)
//   Q5_1     32     24    f16 d | f16 m | qh[4] | qs[16]                 x = d * q + m
//   Q8_0     32     34    f16 d | 32 x int8                              x = d * q
//   IQ4_NL   32     18    f16 d | qs[16] indexes into a 16-entry table   x = d * table[q]
//   Q2_K    256     84    scales[16] (4-bit scale | 4-bit min << 4) | qs[64] 2-bit | f16 d | f16 dmin
//                                 x = d * sc * q - dmin * m       (16 sub-blocks of 16)
//   Q3_K    256    110    hmask[32] third bits | qs[64] 2-bit | scales[12] 6-bit | f16 d
//                                 x = d * (sc - 32) * (q - 4)     (16 sub-blocks of 16)
//   Q4_K    256    144    f16 d | f16 dmin | scales[12] (8 x 6-bit scale, 8 x 6-bit min) | qs[128]
//                                 x = d * sc * q - dmin * m       (8 sub-blocks of 32)
//   Q5_K    256    176    f16 d | f16 dmin | scales[12] | qh[32] fifth bits | qs[128]
//                                 x = d * sc * q - dmin * m       (8 sub-blocks of 32)
//   Q6_K    256    210    ql[128] low 4 bits | qh[64] high 2 bits | int8 scales[16] | f16 d
//                                 x = d * sc * (q - 32)           (16 sub-blocks of 16)
//   IQ4_XS  256    136    f16 d | u16 scales_h | scales_l[4] | qs[128]
//                                 x = d * (sc - 32) * table[q]    (8 sub-blocks of 32, 6-bit sc)
//   MXFP4    32     17    u8 e (E8M0) | qs[16] E2M1 codes               x = 2^(e - 128) * table[q]
//                                 (table: the 16 E2M1 values doubled, kMxfp4Values in blocks.h)
//   Q8_K    256    292    f32 d | 256 x int8 | int16 bsums[16]  (activations only, never a weight)
//
// In the 32-element 4-bit blocks byte j holds element j in its low nibble and element j+16
// in its high one; the K-quant bit packings are drawn in engine/gguf/quantize_k.cpp.
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
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,  // activations only: traits_of(uint32_t) refuses it in files
  iq4_nl = 20,
  iq4_xs = 23,
  bf16 = 30,
  mxfp4 = 39,
};

struct tensor_type_traits {
  std::string_view name;  // as ggml spells it: "Q4_1"
  int64_t block_size;     // elements per block
  size_t block_bytes;     // bytes per block
};

// Every type a weight tensor may have, in ggml's numbering order.
inline constexpr tensor_type kWeightTypes[] = {
    tensor_type::f32,  tensor_type::f16,  tensor_type::q4_0,   tensor_type::q4_1,   tensor_type::q5_0,
    tensor_type::q5_1, tensor_type::q8_0, tensor_type::q2_k,   tensor_type::q3_k,   tensor_type::q4_k,
    tensor_type::q5_k, tensor_type::q6_k, tensor_type::iq4_nl, tensor_type::iq4_xs, tensor_type::bf16,
    tensor_type::mxfp4,
};

// Traits of a type a weight tensor may have; nullopt for any other GGUF type number.
std::optional<tensor_type_traits> traits_of(uint32_t type_id);
tensor_type_traits traits_of(tensor_type type);

// Name of any GGUF/ggml type number, supported or not ("Q5_K", "IQ2_XS"); "type N" if unknown.
std::string ggml_type_name(uint32_t type_id);

// Parses "q4_1", "Q4_1", "f16", ... (case-insensitive). nullopt if not a weight type.
std::optional<tensor_type> parse_tensor_type(std::string_view text);

// Bytes used by a row of n elements; n must be a multiple of the block size.
size_t row_bytes(tensor_type type, int64_t n);

// Comma-separated lower-case names of kWeightTypes, for error messages and help text.
std::string weight_type_list();

// GGUF's general.file_type (llama_ftype) numbers and names, e.g. 15 -> "Q4_K - Medium".
// Empty for a number this table does not know.
std::string file_type_name(int64_t file_type);

}  // namespace tandem
