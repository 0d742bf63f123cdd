// Dot-product kernels, one table per instruction set; the best one the CPU supports is
// chosen once at run time (cpuid), and TANDEM_ISA=generic|avx2|avx512 can force a lower one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/gguf/tensor_type.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/half.h"

namespace tandem::kernels {

// One weight row against up to four activation rows (in the weight type's activation
// format, see activation_format.h):
//   out[i] = sum_j w_row[j] * act_i[j],  act_i = acts + i * act_stride bytes,  i < n_acts <= 4.
// k is the row length in elements (a multiple of 32 for quantized types).
using row_dot_fn = void (*)(int64_t k, const void* w_row, const void* acts, size_t act_stride, int n_acts, float* out);

inline constexpr int kMaxActsPerDot = 4;

// Four activation rows of a Q8 format packed for the matrix-matrix kernels (prefill):
//   qs [n_blocks][4][32] int8   the four rows' quants of each block, side by side
//   d  [n_blocks][4]     float  their scales
//   s  [n_blocks][4]     float  d * sum(qs) (Q8_1; zero for Q8_0)
// Built from the row format by pack_q8_x4 (engine/kernels/matmul.cpp), so the quants and
// scales are the same values the row kernels see.
inline constexpr size_t kPackedX4BlockBytes = 4 * 32 + 4 * 4 + 4 * 4;

// The same four Q8_0 rows in token pairs (packed_layout::token_pairs), one record per block:
//
//   block b: qs [2 pairs][2 halves][2 tokens][16] int8   pair p: tokens 2p, 2p+1;
//                                                        half h: elements 16h .. 16h+15
//            d  [8] float  [d0 d2 n0 n2 | d1 d3 n1 n3]   d: these four rows' scales,
//                                                        n: the next four rows' (or zeros)
//
// so one 32-byte load gives a half of both tokens of a pair, and one multiply by the weight's
// scale the products for eight tokens, element p of each 128-bit half belonging to pair p
// (of the two groups): the layout of AVX2's Q8_0 group kernels (dot_avx2.cpp).
inline constexpr size_t kPackedPairsBlockBytes = 4 * 32 + 8 * 4;

// Q8_K rows (the 256-element types' activations) are not repacked: a group is its four
// tokens' converted rows, back to back (packed_layout::rows), which matmul's converted
// activations already are. Per 32 elements that is four eighths of a block_q8_k.
inline constexpr size_t kPackedRowsBlockBytes = 4 * (4 + 256 + 2 * 16) / 8;

enum class packed_layout { tokens, token_pairs, rows };
inline constexpr size_t packed_block_bytes(packed_layout layout) {
  switch (layout) {
    case packed_layout::tokens:
      return kPackedX4BlockBytes;
    case packed_layout::token_pairs:
      return kPackedPairsBlockBytes;
    case packed_layout::rows:
      return kPackedRowsBlockBytes;
  }
  return 0;
}

// out[i] = dot(w_row, row i of the packed group), i < 4. Implementations sum in the same
// order as the row kernels of their table, so both give bit-identical results: a token's
// logits do not depend on how the step grouped it.
using group_dot_fn = void (*)(int64_t k, const void* w_row, const std::byte* packed, float* out);

// Four weight rows (w_stride bytes apart) against a packed group of four rows:
// out[r * 4 + i] = dot(weight row r, packed row i), each bit-identical to group_dot_fn's.
using group_rows4_fn = void (*)(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed,
                                float* out);

// Four weight rows against two packed groups (a: tokens 0-3, b: tokens 4-7), into the
// output matrix: y[i * y_stride + r] = dot(weight row r, token i), each bit-identical to
// group_dot_fn's.
using group_rows4x2_fn = void (*)(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                                  const std::byte* packed_b, float* y, int64_t y_stride);

// Tiled weights (engine/kernels/tiled_weights.h): one tile of 16 rows by n_tok <= 8 tokens,
//   y[t * y_stride + i] = dot(row i of the tile, token t),   i < 16, t < n_tok,
// from the tile's first (tile, block) record and tiled activation rows act_stride apart.
// Per (row, token) the result does not depend on n_tok. With next_tile non-null the kernel
// also asks for that tile's records into L2, a few cache lines per block as it goes.
using tiled_fn = void (*)(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, int n_tok,
                          float* y, int64_t y_stride, const std::byte* next_tile);
inline constexpr int kTiledMaxTokens = 8;

// From this many tokens in one matmul, llama.cpp switches the 256-element types to its tiled
// (or, for Q4_K, repacked gemm) summation order (see dot_kernels::for_step).
inline constexpr int64_t kLargeStepTokens = 8;

// One bit per weight type (ggml's numbering is under 64), for sets of types.
constexpr uint64_t type_bit(tensor_type type) { return uint64_t{1} << static_cast<uint32_t>(type); }

struct dot_kernels {
  std::string_view isa;  // "generic", "avx2", "avx512"
  row_dot_fn q4_0 = nullptr;
  row_dot_fn q4_1 = nullptr;
  row_dot_fn q8_0 = nullptr;
  row_dot_fn f16 = nullptr;
  row_dot_fn bf16 = nullptr;
  row_dot_fn f32 = nullptr;
  // Attention over an F16 cache, in llama.cpp's summation orders (engine/model/attention.h says
  // which and why); every table gives the same bits.
  //   key_scores: out[j] = q . keys[j] for n <= 16 keys of hd halves each (hd % 16 == 0).
  //     single_token_order: four 16-lane accumulators taking 16-element chunks in turn,
  //     folded (0+2, 1+3, then 0+1) before the 16-lane sum; otherwise one accumulator.
  //   weighted_values: out[d] = sum over chunks c and lanes l of p[16c + l] * v_c[d * v_stride
  //     + l] (v_c: chunk c of transposed values), as 16-lane FMA chains over the chunks
  //     (single_token_order: chunks dealt to four chains in turn, folded 0+2, 1+3, 0+1),
  //     each chain summed like sum16.
  //   sum16: the 16-lane sum in the order of _mm512_reduce_add_ps.
  void (*key_scores)(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order,
                     float* out) = nullptr;
  void (*weighted_values)(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p, int n_chunks,
                          bool single_token_order, float* out) = nullptr;
  float (*sum16)(const float* x) = nullptr;
  // Element-wise: y[i] = fast_exp(x[i]) and gate[i] = fast_silu(gate[i]) * up[i]
  // (engine/kernels/fast_exp.h), bit-identical in every table.
  void (*exp_n)(int64_t n, const float* x, float* y) = nullptr;
  void (*swiglu)(int64_t n, float* gate, const float* up) = nullptr;
  // Matrix-matrix kernels on packed groups of four rows; null where the table has none.
  group_dot_fn q4_0_x4 = nullptr;
  group_dot_fn q4_1_x4 = nullptr;
  group_dot_fn q8_0_x4 = nullptr;

  // Conversions, bit-identical in every table: a row into Q8_0 / Q8_1 blocks (as
  // convert_activation_row), and floats to halves (round to nearest even).
  void (*quantize_q8)(const float* x, void* dst, int64_t k, bool with_sum) = nullptr;
  void (*to_f16)(int64_t n, const float* x, f16_bits* y) = nullptr;

  // Q4_1 weights: four rows by four packed tokens at once (prefill); null if absent.
  group_rows4_fn q4_1_x4_r4 = nullptr;
  // Four rows by two packed groups (eight tokens), Q4_1 and Q8_0 weights; null if absent.
  group_rows4x2_fn q4_1_x8_r4 = nullptr;
  group_rows4x2_fn q8_0_x8_r4 = nullptr;
  // Tiled Q4_1 and Q8_0 weights; null if absent (then weights are not tiled).
  tiled_fn q4_1_tiled = nullptr;
  tiled_fn q8_0_tiled = nullptr;
  // Softmax of one head over n_chunks 16-position chunks of raw scores s (positions past the
  // keys hold -inf), in place: s *= scale, e = exp(s - max) (exp_n), chunk sums in float
  // (sum16) added in double, p = e * float(1 / total) rounded to half (to_f16) and back.
  // attention.cpp's softmax_reference composes exactly that from the primitives above; a
  // table's own is the same in one pass per step. Null where the table has none.
  void (*softmax_half)(float* s, int n_chunks, float scale) = nullptr;
  // Grouped-query attention: the n_q query heads that share one kv head at once, each key
  // and value converted from half once for all of them. Every head's numbers are exactly
  // key_scores' / weighted_values' for that head alone (the same chains, the same order);
  // out[h] receives head h's. Null where the table has none, or returns false for a shape
  // it does not cover (then callers go head by head).
  bool (*key_scores_group)(int64_t hd, const f16_bits* const* q, int n_q, const f16_bits* keys, int n,
                           bool single_token_order, float* const* out) = nullptr;
  bool (*weighted_values_group)(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p,
                                int n_q, int n_chunks, bool single_token_order, float* const* out) = nullptr;
  // Row kernels of the later types (dot_generic_quants.h); a table leaves null the ones it
  // has no kernel of its own for, and for_type then gives the generic one.
  row_dot_fn q5_0 = nullptr;
  // Q5_0 against packed groups (one row by four tokens; four rows by eight); null if absent.
  group_dot_fn q5_0_x4 = nullptr;
  group_rows4x2_fn q5_0_x8_r4 = nullptr;
  row_dot_fn q5_1 = nullptr;
  row_dot_fn iq4_nl = nullptr;
  row_dot_fn q2_k = nullptr;
  row_dot_fn q3_k = nullptr;
  row_dot_fn q4_k = nullptr;
  row_dot_fn q5_k = nullptr;
  row_dot_fn q6_k = nullptr;
  row_dot_fn iq4_xs = nullptr;

  // Tiled Q4_0, Q5_0, Q5_1, Q4_K and Q6_K weights (tiled_weights.h); null if absent.
  tiled_fn q4_0_tiled = nullptr;
  tiled_fn q5_0_tiled = nullptr;
  tiled_fn q5_1_tiled = nullptr;
  tiled_fn q4_k_tiled = nullptr;
  tiled_fn q6_k_tiled = nullptr;

  // Large steps. llama.cpp sums the 256-element types in another order in larger matmuls (its
  // tiled K-quant kernels from kLargeStepTokens tokens; for Q4_K its repacked gemm, which takes
  // the tokens in fours and leaves the last n % 4 to its gemv), and greedy fidelity to it needs
  // the same: these kernels give that order, and matmul uses them (row or tiled) for the
  // tokens large_order_tokens names. A token's logits then depend on its step's size, as in
  // llama.cpp; for every other type (and step size) they do not.
  row_dot_fn q2_k_large = nullptr;
  row_dot_fn q3_k_large = nullptr;
  row_dot_fn q4_k_large = nullptr;
  row_dot_fn q5_k_large = nullptr;
  row_dot_fn q6_k_large = nullptr;
  row_dot_fn iq4_xs_large = nullptr;
  tiled_fn q4_k_tiled_large = nullptr;
  tiled_fn q6_k_tiled_large = nullptr;

  // A row into Q8_K blocks, bit-identical to quant::quantize_q8_k (the K-quants' and IQ4_XS's
  // activations); null where the table has none (then convert_activation_row does it).
  void (*quantize_q8_k)(const float* x, void* dst, int64_t k) = nullptr;
  // A row into the activation format: this table's converter where it has one.
  void convert_activation(activation_format format, const float* x, void* dst, int64_t k) const;

  // How many leading tokens of a step of step_tokens tokens take the large-step order
  // (0 for types without one): Q4_K step_tokens - step_tokens % 4 from 4 tokens, the other
  // 256-element types all of them from kLargeStepTokens.
  static int64_t large_order_tokens(tensor_type type, int64_t step_tokens);
  // The large-step row kernel of a type (this table's, else the generic table's); null for a
  // type without that order.
  row_dot_fn large_for_type(tensor_type type) const;
  // This table's own large-step kernel of the type, or null.
  row_dot_fn own_large_for_type(tensor_type type) const;

  // Types (type_bit) whose tiled kernel serves only steps too small for a packed group of
  // four tokens, larger ones going to the group kernels on the weights' GGUF rows, which the
  // tiled copy then does not replace: AVX2's tiled Q5_0 holds one token's eight lane chains
  // per pass, where its group kernel unpacks each row once for eight tokens.
  uint64_t tiled_small_steps_only = 0;

  // Types (type_bit) tiled only for rows under kNarrowTiledCols columns. With
  // tiled_small_steps_only a tiled matrix is kept twice (prompt steps read the GGUF rows), which
  // for AVX2's Q8_0 pays where rows are short: SmolLM2's one-token steps (576 and 1536 columns)
  // ran 1.2x faster tiled, the row kernel's work per row (a call, a horizontal sum, one FMA
  // chain) being large beside its 18-48 blocks; the 1B shape's (2048 and 8192) 1.0-1.15x,
  // close to the memory limit either way, not worth a second 1 GB.
  uint64_t tiled_narrow_rows_only = 0;
  static constexpr int64_t kNarrowTiledCols = 2048;

  // Types (type_bit, Q8_0 activations only) whose group kernels in this table read packed
  // groups in packed_layout::token_pairs; the others read packed_layout::tokens.
  uint64_t packed_token_pairs = 0;
  packed_layout packed_layout_for(tensor_type type) const {
    if (activation_format_for(type) == activation_format::q8_k) return packed_layout::rows;
    return (packed_token_pairs & type_bit(type)) != 0 ? packed_layout::token_pairs : packed_layout::tokens;
  }

  // Q6_K weights against packed groups (packed_layout::rows) in the large-step order, as
  // q6_k_large gives it: one row by four tokens, four rows by eight; null if absent.
  group_dot_fn q6_k_x4_large = nullptr;
  group_rows4x2_fn q6_k_x8_r4_large = nullptr;
  // Whether this table takes matrices of this type and width tiled (model.cpp tiles those).
  bool tiles(tensor_type type, int64_t cols) const {
    return tiled_for_type(type) != nullptr &&
           (cols < kNarrowTiledCols || (tiled_narrow_rows_only & type_bit(type)) == 0);
  }

  tiled_fn tiled_for_order(tensor_type type, bool large) const {
    if (large)
      return type == tensor_type::q4_k ? q4_k_tiled_large : type == tensor_type::q6_k ? q6_k_tiled_large : nullptr;
    return tiled_for_type(type);
  }
  // The tiled kernel matmul takes for a step of n_tok tokens in this order, or null.
  tiled_fn tiled_for_step(tensor_type type, bool large, int64_t n_tok) const {
    if (n_tok >= 4 && reads_rows_when_tiled(type)) return nullptr;
    return tiled_for_order(type, large);
  }
  // Whether a step can also read the GGUF rows of a tiled matrix of this type.
  bool reads_rows_when_tiled(tensor_type type) const { return (tiled_small_steps_only & type_bit(type)) != 0; }

  tiled_fn tiled_for_type(tensor_type type) const {
    switch (type) {
      case tensor_type::q4_0:
        return q4_0_tiled;
      case tensor_type::q4_1:
        return q4_1_tiled;
      case tensor_type::q8_0:
        return q8_0_tiled;
      case tensor_type::q4_k:
        return q4_k_tiled;
      case tensor_type::q5_0:
        return q5_0_tiled;
      case tensor_type::q5_1:
        return q5_1_tiled;
      case tensor_type::q6_k:
        return q6_k_tiled;
      default:
        return nullptr;
    }
  }

  // The row kernel for a weight type: this table's, else the generic table's; null only for
  // a type no table covers (Q8_K, which is never a weight).
  row_dot_fn for_type(tensor_type type) const;
  // This table's own row kernel for the type, without the generic fallback.
  row_dot_fn own_for_type(tensor_type type) const;
  // The type's kernel for one row by a packed group of four tokens, and for four rows by two
  // groups (eight tokens); null where the table has none.
  group_dot_fn group_for_type(tensor_type type) const;
  group_rows4x2_fn group8_for_type(tensor_type type) const;
  // The same in one summation order: the above, or for large the large-step group kernels.
  group_dot_fn group_for_order(tensor_type type, bool large) const;
  group_rows4x2_fn group8_for_order(tensor_type type, bool large) const;
};

const dot_kernels& generic_dot_kernels();
const dot_kernels& avx2_dot_kernels();    // needs AVX2 + FMA + F16C
const dot_kernels& avx512_dot_kernels();  // needs AVX-512 F/BW/VL/VNNI + the AVX2 set

bool cpu_has_avx2();
bool cpu_has_avx512();

// The best supported table (honouring TANDEM_ISA); decided on first use.
const dot_kernels& best_dot_kernels();

}  // namespace tandem::kernels
