// A transformer of one of the supported architectures (architecture.h) on the CPU: weights
// viewed in the mapped GGUF file, and the one forward pass over a step (engine/model/step.h)
// with the KV cache in a kv_pool; the architecture's row of data picks its hooks.
#pragma once

#include <array>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/experts/moe_ffn.h"
#include "engine/gguf/gguf.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/lora/adapter.h"
#include "engine/lora/step_updates.h"
#include "engine/attention/attention.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/step.h"
#include "engine/model/tiled_cache.h"
#include "engine/platform/thread_pool.h"
#include "engine/platform/zeroed_pages.h"

namespace tandem {

// Where a model's tiled weights came from at open.
enum class tiled_origin {
  none,           // nothing tiled (no tiled kernels, no tileable matrix, or tiled_weights off)
  anonymous,      // tiled into anonymous memory (no cache directory, or it refused the file)
  cache_written,  // tiled into anonymous memory, which is being written to a new cache file
  cache_read,     // mapped from the cache file an earlier open wrote
};

struct model_options {
  int n_threads = 0;  // <= 0: one per hardware thread
  // The compute pool: null means the process's pool of n_threads (shared_thread_pool), which
  // every engine and drafter of the process shares.
  std::shared_ptr<thread_pool> pool = nullptr;
  // llama.cpp sums attention in one order for a single new token and in another for a
  // batch (engine/attention/attention.h). true: follow it per sequence (a sequence bringing one token
  // gets the single-token order), which is what matching its greedy output needs. false:
  // always the batch order, so a token's logits never depend on how steps group tokens.
  bool llama_cpp_attention_order = true;
  // Re-lay Q4_1 and Q8_0 matrices for the tiled kernels (kernels/tiled_weights.h) when the
  // CPU has them (AVX-512 VNNI). false: read them in place in the GGUF layout (benchmarks
  // compare the two).
  bool tiled_weights = true;
  // Where tiled weights are kept between runs (engine/model/tiled_cache.h): an open after
  // the first maps them instead of tiling again. Empty: tile into anonymous memory at every
  // open. The CLI passes $TANDEM_HOME/tiled unless told otherwise (--tiled-cache-dir).
  std::filesystem::path tiled_cache_dir = {};
  // The longest sequence this model will run (0: the trained context). Only Phi-3's
  // LongRoPE reads it (long factors past the original context, as llama.cpp picks them).
  uint32_t context_length = 0;
};

// For each new token of `s`, its embedding row when a run of s.embeddings gives one, else
// null. Throws std::invalid_argument for a run outside the new tokens, of the wrong width, or
// overlapping another.
std::vector<const float*> embedding_row_pointers(const seq_step& s, int64_t n_embd);

// Multimodal RoPE: the (t, h, w, e) positions of each new token of `s`, [tokens][4]. Text
// turns by start_pos + j + the shift of the grid runs before it (all four alike); a grid
// run's token i by (p0, p0 + i / grid_w, p0 + i % grid_w, 0), p0 = the position its first
// token would have as text (embedding_rows). Throws std::invalid_argument for a grid run
// whose rows do not fit its grid.
std::vector<std::array<int32_t, 4>> mrope_positions(const seq_step& s);
// The same appended to `out` (the forward pass's buffer, reused across steps).
void append_mrope_positions(const seq_step& s, std::vector<std::array<int32_t, 4>>& out);

class model {
 public:
  // Keeps `file` (and so its mapping) alive for the model's lifetime.
  model(gguf::file file, const model_options& options = {});
  static std::unique_ptr<model> open(const std::filesystem::path& path, const model_options& options = {});

  const model_config& config() const { return config_; }
  const gguf::file& file() const { return file_; }
  const model_weights& weights() const { return weights_; }
  thread_pool& pool() { return pool_; }
  tiled_origin tiled_from() const { return tiled_origin_; }
  // Bytes of tiled copies whose matrices' GGUF rows stay in use too (prompt steps of the
  // types this CPU's table tiles for small steps only, dot_kernels::tiled_small_steps_only):
  // memory the model holds beyond its file's size. 0 where every tiled matrix replaces its rows.
  size_t tiled_bytes_kept_twice() const { return tiled_kept_twice_; }
  // A cache file this open makes is written in the background; this waits for it (true
  // when it is in place). Returns at once for any other origin.
  bool wait_tiled_cache() { return tiled_file_ == nullptr || tiled_file_->wait_written(); }

  // Runs one step: appends every sequence's new tokens' K/V to `cache` at their positions
  // (through each sequence's block table; the local layers' through its local table when
  // the cache has a local pool) and fills `out` with the requested logits.
  // Throws std::invalid_argument for a token outside the vocabulary or a block table that
  // does not cover the positions (or a local table missing a block of the window). Not thread-safe: one forward at a
  // time per model.
  void forward(const step_input& in, kv_pool& cache, step_output& out);

  // The last forward's routing of a mixture-of-experts layer: [T][k] choices (the step's
  // tokens in order, each strongest first), and how many experts' matrices ran (each once).
  std::span<const experts::expert_choice> expert_choices(uint32_t layer) const { return routes_.at(layer).choices; }

  // The LoRA adapters a step's sequences may name (seq_step::adapter indexes this list).
  // Set before the first forward (the model does not copy them; they stay alive with it).
  void set_adapters(std::vector<std::shared_ptr<const lora::adapter>> adapters) { adapters_ = std::move(adapters); }
  const std::vector<std::shared_ptr<const lora::adapter>>& adapters() const { return adapters_; }
  // Reads an adapter file against this model's shapes (lora::adapter::load).
  std::shared_ptr<const lora::adapter> load_adapter(const std::filesystem::path& path) const;
  int64_t experts_run(uint32_t layer) const { return routes_.at(layer).experts_run; }

 private:
  // Scratch for one step, reused across steps; shapes in the comments, T = new tokens.
  struct buffers {
    std::vector<float> x;                         // [T][n_embd] residual stream
    std::vector<float> h;                         // [T][n_embd] normed input of a sub-layer
    std::vector<float> q;                         // [T][q_dim]
    std::vector<float> k;                         // [T][kv_dim]
    std::vector<float> v;                         // [T][kv_dim]
    std::vector<float> attn;                      // [T][q_dim] attention output, heads side by side
    std::vector<float> proj;                      // [T][n_embd] output of wo / w_down
    std::vector<float> gate;                      // [T][n_ff]
    std::vector<float> up;                        // [T][n_ff]
    std::vector<float> rope;                      // [T][n_rot] cos/sin pairs of each token's position
    std::vector<float> rope_swa;                  // [T][n_rot] the same for the local layers' RoPE base
    std::vector<attention_scratch> attn_scratch;  // [threads]
    std::vector<kernels::f16_bits> q16;           // [threads][q_dim]: a kv head's queries in half
    std::vector<std::byte> q8;                    // [threads][q_dim / 32 block_q8_0]: the same in Q8_0 (Q8_0 cache)
    std::vector<int32_t> pos;                     // [T] position of each token
    std::vector<std::array<int32_t, 4>> mpos;     // [T] multimodal RoPE's positions (arch->mrope)
    std::vector<int32_t> key_end;                 // [T] keys it sees end here (causal: pos + 1)
    std::vector<int32_t> seq;                     // [T] index of its sequence in the step
    std::vector<uint8_t> single_order;            // [T] 1: llama.cpp's one-token summation orders
    kernels::matmul_scratch mm;
  };

  void matmul(const kernels::weight_view& w, const std::vector<float>& x, int64_t n_tok, std::vector<float>& y);
  // Several weights on one input (Q/K/V, gate/up): one conversion, one parallel pass.
  void matmul_shared(const std::vector<float>& x, int64_t n_tok, std::initializer_list<kernels::matmul_output> outputs);
  // y += the step's LoRA updates of (layer, role) over input x (no-op without adapted rows).
  void lora_update(int32_t layer, matrix_role role, const std::vector<float>& x, int64_t x_cols, float* y,
                   int64_t y_stride) {
    if (!lora_.empty()) lora_.apply(layer, role, x.data(), x_cols, y, y_stride, kernels_, pool_);
  }
  void attention_layer(uint32_t layer, const step_input& in, kv_pool& cache, int64_t n_tok);
  void check_local_table(const seq_step& s, const kv_pool& cache) const;
  // The feed-forward hooks (kinds: layer_weights::ffn): b.proj from b.h.
  void ffn_dense(const layer_weights& w, int64_t n_tok);
  void ffn_moe(const layer_weights& w, int64_t n_tok);
  // Without a gate (bert): b.proj = W_down act(W_up h + b_up); b_down joins at the residual add.
  void ffn_ungated(const layer_weights& w, int64_t n_tok);
  // Encoders' inputs on b.x (encoder_hooks.cpp): + token type row 0, + position_embd[pos],
  // then token_embd_norm. Throws std::invalid_argument for a position past the table.
  void add_encoder_inputs(int64_t n_tok);
  // b.h = b.x: a post-norm block's sub-layers read the residual stream itself.
  void residual_as_input(int64_t n_tok);
  // gate[i] = act(gate[i]) * up[i], i < n: the architecture's activation.
  void activate(int64_t n, float* gate, const float* up) const;
  // Residual add of a sub-layer's output (b.proj) plus its bias, through its post-norm, when
  // it has them; then x = layer_norm(x) with (res_norm, res_norm_b) when given (post placement).
  void add_sublayer_output(const std::vector<float>& bias, const std::vector<float>& post_norm, int64_t n_tok,
                           const std::vector<float>& res_norm = {}, const std::vector<float>& res_norm_b = {});

  gguf::file file_;
  model_config config_;
  model_weights weights_;
  std::shared_ptr<thread_pool> pool_owner_;
  thread_pool& pool_;
  bool llama_cpp_order_;
  bool swa_rope_differs_ = false;  // the local layers have a RoPE of their own (gemma3, not gpt-oss)
  const kernels::dot_kernels& kernels_;
  // The tiled copies weights_' views point at (tiled_weights.h): in anonymous memory or in a
  // cache file; both empty when nothing is tiled.
  zeroed_pages tiled_;
  std::unique_ptr<tiled_cache_file> tiled_file_;
  tiled_origin tiled_origin_ = tiled_origin::none;
  size_t tiled_kept_twice_ = 0;
  buffers buf_;
  experts::moe_ffn moe_;  // the mixture-of-experts step and its scratch
  std::vector<std::shared_ptr<const lora::adapter>> adapters_;
  lora::step_updates lora_;       // this step's token rows grouped by adapter
  lora::step_updates lora_head_;  // the same for the rows the head computes
  std::vector<const lora::adapter*> row_adapter_;  // [T] scratch for planning them
  std::vector<float> row_scale_;
  struct route_record {
    std::vector<experts::expert_choice> choices;  // [T][k]
    int64_t experts_run = 0;
  };
  std::vector<route_record> routes_;  // [n_layer]: the last forward's, empty for dense layers
};

}  // namespace tandem
