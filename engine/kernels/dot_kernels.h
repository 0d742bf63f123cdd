// Dot-product kernels, one table per instruction set (generic, avx2, avx512), each an array
// of every weight type's kernels plus the attention, element-wise and conversion kernels.
// The level the CPU supports picks one once (isa.h); every table gives the same bits.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "engine/attention/kv_q8_scores.h"
#include "engine/attention/kv_q8_values.h"
#include "engine/gguf/tensor_type.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/half.h"
#include "engine/kernels/isa.h"

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
// (of the two groups): the layout of AVX2's Q8_0 group kernels (dot_avx2_group.cpp).
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
// (or, for Q4_K, repacked gemm) summation order (see dot_kernels::large_order_tokens).
inline constexpr int64_t kLargeStepTokens = 8;

// Whose rule picks a matmul's large-step tokens: llama.cpp's matrix product (mul_mat) or
// its expert product (mul_mat_id), per expert over the tokens routed to it.
enum class large_step_rule { dense, expert };

// Attention over an F16 cache, in llama.cpp's summation orders (engine/attention/attention.h says
// which and why); every table gives the same bits.
//   key_scores: out[j] = q . keys[j] for n <= 16 keys of hd halves each (hd % 16 == 0).
//     single_token_order: four 16-lane accumulators taking 16-element chunks in turn,
//     folded (0+2, 1+3, then 0+1) before the 16-lane sum; otherwise one accumulator.
//   weighted_values: out[d] = sum over chunks c and lanes l of p[16c + l] * v_c[d * v_stride
//     + l] (v_c: chunk c of transposed values), as 16-lane FMA chains over the chunks
//     (single_token_order: chunks dealt to four chains in turn, folded 0+2, 1+3, 0+1),
//     each chain summed like sum16.
//   sum16: the 16-lane sum in the order of _mm512_reduce_add_ps.
using key_scores_fn = void (*)(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order,
                               float* out);
using weighted_values_fn = void (*)(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p,
                                    int n_chunks, bool single_token_order, float* out);
using sum16_fn = float (*)(const float* x);
// Grouped-query attention: the n_q query heads that share one kv head at once, each key and
// value converted from half once for all of them. Every head's numbers are exactly
// key_scores' / weighted_values' for that head alone (the same chains, the same order);
// out[h] receives head h's. False for a shape it does not cover (then callers go head by head).
using key_scores_group_fn = bool (*)(int64_t hd, const f16_bits* const* q, int n_q, const f16_bits* keys, int n,
                                     bool single_token_order, float* const* out);
using weighted_values_group_fn = bool (*)(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride,
                                          const float* const* p, int n_q, int n_chunks, bool single_token_order,
                                          float* const* out);
// Softmax of one head over n_chunks 16-position chunks of raw scores s (positions past the
// keys hold -inf), in place: s *= scale, e = exp(s - max) (exp_n), chunk sums in float
// (sum16) added in double, p = e * float(1 / total) rounded to half (to_f16) and back.
// `sink` is a logit that joins the denominator but no value (gpt-oss's attention sinks;
// -inf for none, which changes no bit): it takes part in the max, and total += double(expf(sink
// - max)) after the chunks, as ggml's soft_max adds it (libm's expf). attention.cpp's
// softmax_reference composes exactly that from the primitives; a table's own is the same in
// one pass per step.
using softmax_half_fn = void (*)(float* s, int n_chunks, float scale, float sink);
// Element-wise: y[i] = fast_exp(x[i]) and gate[i] = fast_silu(gate[i]) * up[i]
// (engine/kernels/fast_exp.h), bit-identical in every table.
using exp_n_fn = void (*)(int64_t n, const float* x, float* y);
using swiglu_fn = void (*)(int64_t n, float* gate, const float* up);
// Conversions, bit-identical in every table: a row into Q8_0 / Q8_1 blocks (as
// convert_activation_row), into Q8_K blocks (as quant::quantize_q8_k), and floats to halves
// (round to nearest even).
using quantize_q8_fn = void (*)(const float* x, void* dst, int64_t k, bool with_sum);
using quantize_q8_k_fn = void (*)(const float* x, void* dst, int64_t k);
using to_f16_fn = void (*)(int64_t n, const float* x, f16_bits* y);

// One weight type's kernels in one summation order; null where the table has none. Every
// kernel of an order gives, per (row, token), the row kernel's bits: a token's logits do not
// depend on which of them matmul took.
struct order_kernels {
  row_dot_fn row = nullptr;            // one row by up to four tokens
  group_dot_fn group = nullptr;        // one row by a packed group of four tokens (prefill)
  group_rows4_fn rows4 = nullptr;      // four rows by a packed group
  group_rows4x2_fn rows4x2 = nullptr;  // four rows by two packed groups, into the output
  tiled_fn tiled = nullptr;            // tiled weights (tiled_weights.h); without it the type is not tiled
};

// A table's kernels for one weight type.
struct type_kernels {
  // The order whose bits do not depend on the step's size; its row kernel is never null for a
  // weight type (tests/unit/kernel_tables_test.cpp checks every table).
  order_kernels ordinary{};
  // The large-step order. llama.cpp sums the 256-element types in another order in larger
  // matmuls (its tiled K-quant kernels from kLargeStepTokens tokens; for Q4_K its repacked
  // gemm, which takes the tokens in fours and leaves the last n % 4 to its gemv), and greedy
  // fidelity to it needs the same: matmul takes these kernels for the tokens
  // large_order_tokens names. A token's logits then depend on its step's size, as in
  // llama.cpp. All null for the types without that order.
  order_kernels large{};
  // The tiled kernel serves only steps too small for a packed group of four tokens; larger
  // ones go to the group kernels on the GGUF rows, which the tiled copy then does not
  // replace: AVX2's tiled Q5_0 holds one token's eight lane chains per pass, where its group
  // kernel unpacks each row once for eight tokens.
  bool tiled_small_steps_only = false;
  // Tiled only for rows under dot_kernels::kNarrowTiledCols columns. With
  // tiled_small_steps_only a tiled matrix is kept twice (prompt steps read the GGUF rows),
  // which for AVX2's Q8_0 pays where rows are short: SmolLM2's one-token steps (576 and 1536
  // columns) ran 1.2x faster tiled, the row kernel's work per row (a call, a horizontal sum,
  // one FMA chain) being large beside its 18-48 blocks; the 1B shape's (2048 and 8192)
  // 1.0-1.15x, close to the memory limit either way, not worth a second 1 GB.
  bool tiled_narrow_rows_only = false;
  // The group kernels (Q8_0 activations only) read packed groups in
  // packed_layout::token_pairs; otherwise in packed_layout::tokens (rows for Q8_K).
  bool packed_token_pairs = false;
};

// A table's row kernels of one type, in the ordinary and the large-step order (null for the
// types without one).
struct type_rows {
  tensor_type type;
  row_dot_fn row;
  row_dot_fn large = nullptr;
};
// A table's other kernels of one type (its row kernels come from the rows list).
struct type_entry {
  tensor_type type;
  type_kernels kernels;
};

// The kernels by tensor type: slot static_cast<size_t>(type) for every weight type and Q8_K.
inline constexpr size_t kTypeSlots = [] {
  size_t n = static_cast<size_t>(tensor_type::q8_k) + 1;
  for (const tensor_type t : kWeightTypes) n = std::max(n, static_cast<size_t>(t) + 1);
  return n;
}();
using type_table = std::array<type_kernels, kTypeSlots>;

// Every table's per-type kernels are built the same way: the row kernels of every type
// (`rows`), and the other kernels of the types that have them (`others`, which names no row
// kernel). Each type at most once per list; std::logic_error otherwise.
type_table make_type_table(std::span<const type_rows> rows, std::initializer_list<type_entry> others = {});

struct dot_kernels {
  std::string_view isa;  // "generic", "avx2", "avx512"
  type_table types{};

  key_scores_fn key_scores = nullptr;
  weighted_values_fn weighted_values = nullptr;
  sum16_fn sum16 = nullptr;
  key_scores_group_fn key_scores_group = nullptr;            // null where the table has none
  weighted_values_group_fn weighted_values_group = nullptr;  // null where the table has none
  softmax_half_fn softmax_half = nullptr;                    // null where the table has none
  // Attention over a Q8_0 cache: every key's scores in one call (kv_q8_scores.h; null where
  // the table has no such form: then callers take the Q8_0 row kernel per key), and the
  // values' sums (kv_q8_values.h).
  q8_0_scores_fn q8_0_scores = nullptr;
  q8_0_values_fn q8_0_values = nullptr;
  exp_n_fn exp_n = nullptr;
  swiglu_fn swiglu = nullptr;
  quantize_q8_fn quantize_q8 = nullptr;
  quantize_q8_k_fn quantize_q8_k = nullptr;  // null where the table has none (convert_activation_row does it)
  to_f16_fn to_f16 = nullptr;

  const type_kernels& of(tensor_type type) const { return types[static_cast<size_t>(type)]; }
  // A type's kernels in one summation order (large: the large-step order).
  const order_kernels& in_order(tensor_type type, bool large) const {
    return large ? of(type).large : of(type).ordinary;
  }

  // A row into the activation format: this table's converter where it has one.
  void convert_activation(activation_format format, const float* x, void* dst, int64_t k) const;

  // How many leading tokens of a step of step_tokens tokens take the large-step order
  // (0 for types without one): Q4_K step_tokens - step_tokens % 4 from 4 tokens, the other
  // 256-element types all of them from kLargeStepTokens. For one expert's tokens of an
  // expert product (large_step_rule::expert, llama.cpp's mul_mat_id) Q4_K none: its
  // repacked product runs the gemv for each token there.
  static int64_t large_order_tokens(tensor_type type, int64_t step_tokens,
                                    large_step_rule rule = large_step_rule::dense);

  static constexpr int64_t kNarrowTiledCols = 2048;
  // Whether this table takes matrices of this type and width tiled (model.cpp tiles those).
  bool tiles(tensor_type type, int64_t cols) const {
    return of(type).ordinary.tiled != nullptr && (cols < kNarrowTiledCols || !of(type).tiled_narrow_rows_only);
  }
  // Whether a step can also read the GGUF rows of a tiled matrix of this type.
  bool reads_rows_when_tiled(tensor_type type) const { return of(type).tiled_small_steps_only; }
  // The tiled kernel matmul takes for a step of n_tok tokens in this order, or null.
  tiled_fn tiled_for_step(tensor_type type, bool large, int64_t n_tok) const {
    if (n_tok >= 4 && reads_rows_when_tiled(type)) return nullptr;
    return in_order(type, large).tiled;
  }
  // The layout this table's group kernels of the type read.
  packed_layout packed_layout_for(tensor_type type) const {
    if (activation_format_for(type) == activation_format::q8_k) return packed_layout::rows;
    return of(type).packed_token_pairs ? packed_layout::token_pairs : packed_layout::tokens;
  }
};

const dot_kernels& generic_dot_kernels();
const dot_kernels& avx2_dot_kernels();    // needs isa_level::avx2
const dot_kernels& avx512_dot_kernels();  // needs isa_level::avx512

// The table a level runs (isa.h has the list).
const dot_kernels& dot_kernels_for(isa_level level);
// The table kernel_isa() runs.
const dot_kernels& best_dot_kernels();

}  // namespace tandem::kernels
