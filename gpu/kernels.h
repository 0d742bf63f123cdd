// Launchers of the CUDA kernels: plain C++ declarations (the kernels live in the .cu files
// beside this header). Every launcher takes its stream explicitly and only enqueues work;
// pointers are device pointers unless a parameter says otherwise. Shapes row-major.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf/tensor_type.h"
#include "gpu/device.h"
#include "gpu/formats/weight_layout.h"
#include "gpu/plan/gemv_tuning.h"
#include "gpu/plan/kv_dtype.h"

namespace tandem::gpu {

// out[t][0..n_embd) = dequantized row tokens[t] of `table` (a device layout,
// gpu/formats/weight_layout.h, of n_vocab x n_embd).
void launch_embed_rows(const matrix_layout& table, const void* base, const int32_t* tokens, int32_t n_tok, float* out,
                       stream_handle s);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of n elements.
void launch_rms_norm(const float* x, const float* w, float* y, int32_t n_rows, int32_t n, float eps, stream_handle s);

// RoPE in place, as engine/kernels/ops.h: theta_i = pos * base^(-2i/n_rot) by repeated
// float multiplication, angle = freq_scale * theta_i / factor_i (factors nullable), cos and
// sin times mscale; pairs (2i, 2i+1) of each head (Llama's normal style) or (i, i + n_rot/2)
// (NeoX: qwen2, qwen3, gemma3, phi3). x is [n_tok][n_heads*head_dim].
struct rope_args {
  int32_t n_heads = 0, head_dim = 0, n_rot = 0;
  float freq_base = 10000.0f, freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [n_rot / 2] device, or null
  float mscale = 1.0f;                  // Phi-3 LongRoPE's attention factor
  bool neox = false;
};
void launch_rope(float* x, const int32_t* positions, int32_t n_tok, const rope_args& a, stream_handle s);

// gate[i] = silu(gate[i]) * up[i].
void launch_swiglu(float* gate, const float* up, size_t n, stream_handle s);
// gate[i] = gelu_tanh(gate[i]) * up[i], GELU as the CPU engine's half-precision table.
void launch_geglu(float* gate, const float* up, size_t n, stream_handle s);
// x[i] += y[i].
void launch_add(float* x, const float* y, size_t n, stream_handle s);
// y[r][i] += bias[i] for n_rows rows of `width`.
void launch_add_bias(float* y, const float* bias, int32_t n_rows, int32_t width, stream_handle s);
// x[i] *= scale.
void launch_scale(float* x, size_t n, float scale, stream_handle s);
// x[i] = cap * tanh(x[i] / cap).
void launch_softcap(float* x, size_t n, float cap, stream_handle s);

// Activations of a matrix product, [n_tok][cols]: the floats (F32/F16/BF16 weights read
// them) and their q8 runs from launch_quantize_q8 (the quantized formats read those).
struct gemv_activations {
  const float* f = nullptr;
  const int8_t* q = nullptr;  // [n_tok][cols]
  const float* ds = nullptr;  // [n_tok][cols / 32][2]: d, s
};
// q, ds of x [n_tok][cols] (cols a multiple of 32), as gpu/formats/block_math.h's
// quantize_run: per run of 32, d = max|x| / 127, q = rint(x / d), s = d * sum(q).
void launch_quantize_q8(const float* x, int32_t n_tok, int32_t cols, int8_t* q, float* ds, stream_handle s);

// Where a product's rows go: rows [end[k-1], end[k]) of the (possibly fused) matrix to
// y[k], laid out [n_tok][end[k] - end[k-1]] (end[-1] = 0). One output: {{y}, {rows}, 1}.
inline constexpr int kMaxGemvOutputs = 3;
struct gemv_outputs {
  float* y[kMaxGemvOutputs] = {nullptr, nullptr, nullptr};
  int32_t end[kMaxGemvOutputs] = {0, 0, 0};
  int32_t n = 1;
};
// y = W x for n_tok tokens (decode and small batches: the weights are read once per tile
// of gemv_token_tile(n_tok) tokens), W in its device layout at `base`; `v` from
// pick_gemv_variant (gpu/plan/gemv_tuning.h).
void launch_gemv(const matrix_layout& w, const void* base, const gemv_activations& x, int32_t n_tok,
                 const gemv_outputs& out, gemv_variant v, stream_handle s);

// The paged KV cache of one layer on the device: keys and values, each
//   [n_blocks][n_head_kv][block_tokens][head_dim] elements of `dtype` (gpu/plan/kv_dtype.h:
//   F16, or FP8 E4M3 of one byte with no scale)
// (V is not transposed here, unlike the CPU pool: a warp reads one position's head_dim
// values contiguously). k and v are the layer's first element whatever the dtype (for FP8 a
// byte address): block b of a layer starts kv_dtype_bytes(dtype) * b * n_head_kv *
// block_tokens * head_dim bytes after it. Token t goes to slot slots[t] = block *
// block_tokens + pos % block_tokens.
struct kv_layer {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int32_t n_head_kv = 0, head_dim = 0, block_tokens = 16;
  kv_dtype dtype = kv_dtype::f16;
};
// Converts n_tok rows of k and v ([n_tok][n_head_kv * head_dim] floats) to the cache's dtype
// and stores them: F16 round to nearest even (overflow to infinity, as __float2half_rn);
// E4M3 as e4m3_from_float (round to nearest even, saturating at +-448, NaN stays NaN).
void launch_kv_store(const float* k, const float* v, const int32_t* slots, int32_t n_tok, const kv_layer& kv,
                     stream_handle s);

// Paged attention for decode, prefill chunks and verification alike: token t (of sequence
// row_seq[t], at position p = positions[t]) attends keys [lo, p] through its sequence's
// block table (tables[row_seq[t]][0..table_width)), lo = max(0, p - window + 1) on a
// sliding-window layer (a.window > 0) and 0 otherwise: causal over the new tokens because
// their keys are stored first. Only the table entries of the blocks holding keys [lo, p]
// are read (entries before lo's block may hold anything, such as the engine's kNoBlock).
// q is [n_tok][n_head][head_dim], out the same. Query head h reads KV head
// h / (n_head / n_head_kv); a block reads each key and value of a KV head once for up to
// kAttentionMaxGroup of its query heads (gpu/plan/launch_config.h). Split-K: each token's
// keys [lo, p] are cut, from lo on, into n_splits partitions of keys_per_split, planned by
// plan_attention_splits with n_pairs = n_tok * attention_blocks_per_token(n_head, n_head_kv)
// and max_keys = attention_visible_keys(longest context, window); with n_splits > 1,
// partials holds n_tok * n_head * n_splits * (head_dim + 2) floats (unused, may be null,
// with one split). head_dim a multiple of 8 up to 256; n_head a multiple of n_head_kv; q and
// the cache 16-byte aligned.
struct attention_args {
  int32_t n_head = 0;
  float scale = 1.0f;
  int32_t table_width = 0;
  int32_t n_splits = 1, keys_per_split = 0;
  int32_t window = 0;  // > 0: a sliding-window layer's keys per query, its own included
};
void launch_paged_attention(const float* q, const int32_t* positions, const int32_t* row_seq, const int32_t* tables,
                            int32_t n_tok, const kv_layer& kv, const attention_args& a, float* partials, float* out,
                            stream_handle s);

// Tiled (flash) attention on the tensor cores for prefill chunks and mixed steps, with the
// semantics of launch_paged_attention: row t attends keys [lo, positions[t]] of its
// sequence through tables[seq][0..table_width), window included, reading only the table
// entries of the blocks from the earliest visible key of each tile on. `tiles` (device,
// n_tiles of them) come from plan_prefill_tiles (gpu/plan/launch_config.h) over the step's
// rows with prefill_tile_tokens(n_head, n_head_kv) rows per tile; every row of the step must
// be in one tile. Q is rounded to F16 (FP8 keys and values are converted to F16 exactly); S
// and the output accumulate in F32, P is rounded to F16. Needs
// prefill_attention_supported(head_dim, n_head, n_head_kv); a.n_splits and a.keys_per_split
// are not used. q and out [n_tok][n_head][head_dim]; q and the cache 16-byte aligned.
struct prefill_tile;
void launch_prefill_attention(const float* q, const int32_t* positions, const int32_t* tables,
                              const prefill_tile* tiles, int32_t n_tiles, const kv_layer& kv, const attention_args& a,
                              float* out, stream_handle s);

// Sampling where the logits are: one token id per row of logits [n_rows][n_vocab], -1 when
// every logit is NaN or -inf. The distribution is engine/sampling/sampler.h's distribution() for
// the same options (after bias and penalties, which launch_adjust_logits applies beforehand).
struct sample_params {
  float temperature = 1.0f;  // <= 0: greedy (argmax, lowest id on ties)
  float min_p = 0.0f;        // keep tokens with p >= min_p * p_max
  uint64_t seed = 0;
  uint64_t counter = 0;  // draws made so far with this seed (step number)
  int32_t top_k = 0;     // <= 0: off; else the k most likely (ties: lower id first)
  float top_p = 1.0f;    // >= 1: off; else the shortest sorted prefix reaching top_p
};
void launch_argmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, stream_handle s);
// Exact categorical draws by the Gumbel-max trick (argmax of logit/T + Gumbel noise from a
// counter-based hash of seed, counter and token id): reproducible for a seed, no sort.
// top-k and top-p cut the row at a threshold found by radix select (four passes over the
// row each, four more only when tokens tie exactly at the threshold).
void launch_sample(const float* logits, const sample_params* params, int32_t n_rows, int32_t n_vocab, int32_t* out,
                   stream_handle s);

// Repetition / frequency / presence penalties (launch_adjust_logits applies them):
// repetition divides a positive logit and multiplies a negative one; frequency subtracts
// count * f; presence p.
struct penalty_params {
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
};

}  // namespace tandem::gpu

namespace tandem::gpu {

// dst[i] = src[rows[i]] for n rows of `width` floats.
void launch_gather_rows(const float* src, const int32_t* rows, int32_t n, int32_t width, float* dst, stream_handle s);

}  // namespace tandem::gpu

namespace tandem::gpu {

// out[i] = x[i] rounded to BF16 (bf16 = true) or F16, as raw bits.
void launch_to_half(const float* x, size_t n, uint16_t* out, bool bf16, stream_handle s);
// Rows [row0, row0 + n_rows) of W (a device layout at `base`) dequantized to BF16 bits,
// [n_rows][cols] row-major.
void launch_dequantize_bf16(const matrix_layout& w, const void* base, int64_t row0, int64_t n_rows, uint16_t* out,
                            stream_handle s);

}  // namespace tandem::gpu

namespace tandem::gpu {

// Fills a matrix in its device layout with reproducible random weights (benchmarks): values
// of magnitude up to about 0.05, scales chosen so every format decodes to that range.
void launch_random_weights(const matrix_layout& w, void* base, uint64_t seed, stream_handle s);

}  // namespace tandem::gpu

// --- Sampling additions: logit bias and log-probabilities on the device ------------------
namespace tandem::gpu {

// Logit bias, then repetition / frequency / presence penalties, in place, from each row's
// adjusted tokens in CSR form (gpu/plan/sampling_inputs.h, logit_adjust_csr): entry j of row r
// (j in [offsets[r], offsets[r+1])) is token tokens[j], seen counts[j] times (0: no penalty),
// with bias[j] added first. saved[j] receives the token's raw logit, for launch_logprobs.
// Rounding as the CPU sampler's (no fused multiply-add).
void launch_adjust_logits(float* logits, int32_t n_rows, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                          const int32_t* counts, const float* bias, const penalty_params* params, float* saved,
                          stream_handle s);

// Log-probabilities of the raw logits (the model's distribution, before bias, penalties and
// temperature), as engine/sampling/sampler.h reports them: of the sampled token and of the
// top_n best (logit descending, lower id first on ties; then, when fewer are usable, the
// unusable ones by id at -inf).
inline constexpr int32_t kMaxTopLogprobs = 20;
struct row_logprobs {
  float logprob = 0.0f;  // of the sampled token (0 when nothing was sampled)
  int32_t n_top = 0;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};
// For each row r with top_n[r] >= 0 (at most kMaxTopLogprobs): restores the raw logits the
// adjustment changed (offsets/tokens/saved as launch_adjust_logits had them; offsets null:
// none), then fills out[r] for the token sampled[r]. Other rows are left alone.
void launch_logprobs(float* logits, int32_t n_rows, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                     const float* saved, const int32_t* sampled, const int32_t* top_n, row_logprobs* out,
                     stream_handle s);

// Speculative verification of point-mass drafts (engine/sampling/speculative.h) on the
// device: launch_sample's distribution p per row and, for a row with drafts[r] = x >= 0,
// p(x), the verdict (accepted with probability p(x), from the row's seed and counter) and in
// out[r] a draw from p without x (what a rejection emits). Rows with drafts[r] < 0 draw as
// launch_sample does (a bonus row). Greedy rows accept exactly the argmax.
struct draft_verdict {
  int32_t verdict = -1;  // 1 accepted (or, without a draft, drawn), 0 rejected, -1 nothing usable
  float p_draft = 0.0f;  // p(x)
};
void launch_verify(const float* logits, const sample_params* params, const int32_t* drafts, int32_t n_rows,
                   int32_t n_vocab, int32_t* out, draft_verdict* verdicts, stream_handle s);

}  // namespace tandem::gpu
