// One forward step over a batch of sequences: the plain structs that travel between the
// scheduler's step plan and the model (DESIGN.md). Each sequence brings any number of new
// tokens at its own positions: 1 for decode, many for a prefill chunk, K+1 when verifying
// K draft tokens (the last accepted token followed by the drafts, with want_all_logits).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/ids.h"

namespace tandem {

// Rows that enter a step as embeddings instead of token lookups (an image's projected
// patches): new tokens [offset, offset + count) of the sequence take the n_embd-float rows
// first, first + 1, ... of `rows`; their token ids are placeholders, not looked up (nor
// checked against the vocabulary). The rows are shared, not copied, as a step travels.
//
// bidirectional (Gemma 3's images): each of these tokens also sees the keys after it up to
// the run's end, as llama.cpp decodes such an image with causal attention off. A step holds
// such a run through its end (a chunk may start inside one, after a prefix-cache hit, never
// stop inside one: step_planner's atomic runs), so those keys are stored by this step.
//
// grid_w, grid_h (a model with multimodal RoPE: qwen2vl): the whole run is an image of
// grid_h rows of grid_w tokens in raster order (grid_w * grid_h tokens, of which this step
// may compute a part). Its token i (counting from the run's start, so first + k for the k-th
// row here) turns by the positions (t, h, w) = (p0, p0 + i / grid_w, p0 + i % grid_w), p0
// being the position the run's first token would have as text; the tokens after the run go
// on from p0 + max(grid_w, grid_h) (libmtmd's M-RoPE positions). 0: the run's tokens are
// at their own positions, as text.
struct embedding_rows {
  int32_t offset = 0;
  int32_t count = 0;
  std::shared_ptr<const std::vector<float>> rows;  // [first + count or more][n_embd]
  int32_t first = 0;
  bool bidirectional = false;
  int32_t grid_w = 0, grid_h = 0;
};

// RoPE positions a grid run moves the text after it by: max(grid_w, grid_h) instead of its
// token count (0 for a run without a grid).
inline int32_t rope_shift_after(const embedding_rows& e) {
  if (e.grid_w <= 0 || e.grid_h <= 0) return 0;
  return (e.grid_w > e.grid_h ? e.grid_w : e.grid_h) - e.grid_w * e.grid_h;
}

struct seq_step {
  seq_id seq = 0;
  std::vector<int32_t> tokens;   // new tokens, at positions start_pos, start_pos + 1, ...
  int32_t start_pos = 0;         // positions [0, start_pos) are already in the KV cache
  block_table blocks;            // must cover start_pos + tokens.size() positions
  bool want_all_logits = false;  // logits for every new token, else for the last one only
  // Compute every new token with exactly the numerics of a one-token decode step (draft
  // verification: greedy speculation must reproduce greedy decoding bit for bit).
  bool decode_numerics = false;
  // With a local pool in the cache (kv_pool_options::local_blocks): the sliding-window
  // layers' table, entry for entry with `blocks` over that pool's ids; entries the window
  // has passed may be kNoBlock (engine/kv/kv_window.h). Unused without one.
  block_table local_blocks = {};
  // Disjoint runs of new tokens given as embedding rows; empty for text.
  std::vector<embedding_rows> embeddings = {};
  // An embedding (pooling) sequence: the step returns the final hidden state of every new
  // token (after the output norm, before the head: what llama.cpp pools) in
  // step_output::hidden, and no logits (want_all_logits is ignored).
  bool want_hidden = false;
  // A LoRA adapter over the weights for this sequence's rows: an index into the model's
  // adapters (model::set_adapters), -1 for none, at this scale (llama.cpp's user scale: the
  // update is scaled by adapter_scale * alpha / rank). engine/lora/step_updates.h.
  int32_t adapter = -1;
  float adapter_scale = 1.0f;
  // Multimodal RoPE: what the grid runs that end at or before start_pos moved the positions
  // by (the sum of their rope_shift_after, <= 0): new token i outside a grid run turns by
  // the position start_pos + i + rope_shift (+ the shifts of the runs this step finishes
  // before it). Positions in the KV cache (blocks, masks) are the tokens' own; only RoPE
  // reads these.
  int32_t rope_shift = 0;
};

struct step_input {
  std::vector<seq_step> seqs;
  // 0: every layer. Otherwise only the first n_layers transformer blocks run before the
  // output norm and head: the draft pass of self-speculation (layer skipping). The KV cache
  // then needs only those layers.
  uint32_t n_layers = 0;
};

// Logits rows in input order: for sequence i, rows [first_row[i], first_row[i] + n_rows[i]).
struct step_output {
  int32_t n_vocab = 0;
  std::vector<float> logits;       // [total rows][n_vocab]
  std::vector<int32_t> first_row;  // per sequence
  std::vector<int32_t> n_rows;     // per sequence: 1, or tokens.size() with want_all_logits

  // Logits of the j-th returned row of sequence i (j = 0 is the only one without all logits).
  std::span<const float> row(size_t seq, int32_t j = 0) const {
    const size_t r = static_cast<size_t>(first_row[seq] + j);
    return {logits.data() + r * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab)};
  }
  // The last row of sequence i: the next-token distribution.
  std::span<const float> last(size_t seq) const { return row(seq, n_rows[seq] - 1); }

  // Sequences with want_hidden: their new tokens' final hidden states, in input order,
  // [first_hidden[i], first_hidden[i] + tokens.size()) rows of n_embd floats; other
  // sequences have none (n_rows is 0 for these).
  int32_t n_embd = 0;
  std::vector<float> hidden;
  std::vector<int32_t> first_hidden;  // per sequence
  std::span<const float> hidden_rows(size_t seq, size_t n_tokens) const {
    const size_t e = static_cast<size_t>(n_embd);
    return {hidden.data() + static_cast<size_t>(first_hidden[seq]) * e, n_tokens * e};
  }
};

}  // namespace tandem
