// A Llama-family model on one CUDA device: weights uploaded once, a paged KV pool in device
// memory, and the forward pass of one step (engine/model/step.h) enqueued on a caller's stream,
// mirroring engine/model/model.cpp layer by layer:
//
//   x = embed(tokens) [* sqrt(n_embd)]
//   per layer:  h = norm(x); q,k,v = Wq h [+ bq], Wk h [+ bk], Wv h [+ bv];
//               [per-head norm(q), norm(k)]; rope(q, k); store k, v in the cache;
//               attn = paged_attention(q); x += [norm](Wo attn)
//               h = norm(x); gate, up = Wg h, Wu h; gate = act(gate) * up; x += [norm](Wd gate)
//   logits = Wout norm(x[rows that want logits]) [soft-capped]
//
// The bracketed steps are the architecture's (engine/model/architecture.h: the same row of
// traits the CPU forward pass reads), and the biases and norms the file has.
//
// Weights live in the device layouts of gpu/formats/weight_layout.h. Matrices that read the
// same input and share a type are stacked into one (Wq|Wk|Wv, Wg|Wu), so a decode step
// reads each input once and launches one GEMV for them; the product writes each part to its
// own output.
// Plain C++ (no CAF, no CUDA headers): the kernels are behind gpu/kernels.h. Enqueueing
// never waits for the device; the host part of a step (validation, packing the integer
// inputs into pinned memory) runs before anything is enqueued.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/step.h"
#include "gpu/device.h"
#include "gpu/gemm.h"
#include "gpu/graph.h"
#include "gpu/kernels.h"
#include "gpu/plan/graph_cache.h"
#include "gpu/plan/kv_budget.h"
#include "gpu/plan/matrix_stacks.h"
#include "gpu/plan/step_packing.h"
#include "gpu/plan/workspace_plan.h"

namespace tandem::gpu {

// A weight matrix on the device: one or more source matrices stacked by rows.
struct device_matrix {
  matrix_layout layout;
  device_buffer bytes;
  int32_t n_parts = 1;
  int32_t part_end[kMaxGemvOutputs] = {0, 0, 0};  // cumulative rows of the parts
  gemv_variant variant[4];                        // per GEMV token tile 1, 2, 4, 8
  // With gpu_model_options::bf16_shadow, a quantized matrix's BF16 copy [rows][cols].
  device_buffer shadow;

  bool quantized() const { return fmt_is_quantized(layout.type); }
  static bool fmt_is_quantized(tensor_type t) {
    return t != tensor_type::f32 && t != tensor_type::f16 && t != tensor_type::bf16;
  }
};

struct gpu_model_options {
  uint32_t block_tokens = 16;
  int32_t n_blocks = 0;  // KV blocks; 0: as many as gpu_memory_utilization allows
  double gpu_memory_utilization = 0.9;
  step_limits limits;          // largest step; max_table_width 0: n_ctx_train / block_tokens
  uint32_t staging_slots = 2;  // pinned input buffers: steps that may be in flight at once
  // Matrix products of at least this many tokens go to cuBLAS (tensor cores); fewer, to the
  // dequantizing GEMV, which reads each weight byte once per 8 tokens.
  int32_t gemm_min_tokens = 16;
  // Decode steps (one token per sequence) as CUDA graphs, padded to a bucket; off: every
  // step launches its kernels one by one (--enforce-eager).
  bool cuda_graphs = false;
  // Keep a BF16 copy of every quantized matrix for the tensor-core GEMM of large steps
  // (prefill), instead of dequantizing each matrix into scratch before every product; the
  // GEMV of decode steps keeps reading the quantized weights. gpu_sizing decides it
  // (gpu/plan/gpu_sizing.h: when the copies leave the KV pool at least half its size).
  bool bf16_shadow = false;
  // The KV cache's element type (--kv-cache-dtype: F16, or FP8 E4M3 at half the bytes).
  gpu::kv_dtype kv_dtype = gpu::kv_dtype::f16;
  // Benchmarks: keep the dequantization scratch beside the copies (use_bf16_shadow(false)).
  bool keep_dequantize_scratch = false;
};

struct graph_counts {
  uint64_t captures = 0, replays = 0, eager = 0;  // steps of each kind
};

// Where a step's outputs are on the device after enqueue_forward (valid until the next one).
struct step_rows {
  int32_t n_rows = 0;              // logit rows
  std::vector<int32_t> first_row;  // per sequence (as step_output)
  std::vector<int32_t> n_rows_of;  // per sequence
};

class gpu_model {
 public:
  // Uploads the weights (synchronously: start-up only) and allocates KV pool and workspace.
  gpu_model(const model_config& config, const model_weights& weights, const gpu_model_options& options = {});
  // Random weights made on the device (benchmarks with real shapes): matrices in
  // weight_type, embedding and output head in head_type (untied unless config says tied).
  struct synthetic_weights {
    tensor_type weight_type = tensor_type::bf16;
    tensor_type head_type = tensor_type::bf16;  // the embedding (and the head unless output_type is set)
    uint64_t seed = 1;
    std::optional<tensor_type> output_type;
    // Per-layer types of attn_v and ffn_down (layer i takes entry i), as a file type's
    // mixture gives them (Q4_K_M: Q6_K in some layers); empty: weight_type.
    std::vector<tensor_type> attn_v_types, ffn_down_types;
  };
  gpu_model(const model_config& config, const synthetic_weights& weights, const gpu_model_options& options = {});

  const model_config& config() const { return config_; }
  int32_t n_blocks() const { return n_blocks_; }  // the scheduler's; one scratch block more is allocated
  const graph_counts& graphs() const { return graph_counts_; }
  size_t weight_bytes() const { return weight_bytes_; }
  size_t kv_bytes() const { return kv_.bytes(); }

  // Enqueues one step on `s`. Throws std::invalid_argument as model::forward does (bad token,
  // uncovered positions, bad block id) and when the step exceeds the limits, before anything
  // is enqueued. `slot` picks the pinned staging buffer (the caller keeps at most
  // staging_slots steps in flight). With cuda_graphs, a decode step is padded to its bucket
  // and captured or replayed (gpu/plan/graph_cache.h); its logit rows are still 0..n-1.
  step_rows enqueue_forward(const step_input& in, stream_handle s, uint32_t slot = 0);
  // Copy-on-write of the KV cache: block src's keys and values in every layer to block dst.
  void enqueue_copy_block(int32_t src, int32_t dst, stream_handle s);
  // Device logits [n_rows][n_vocab] of the last enqueued step (device sampling applies
  // penalties to them in place).
  float* logits() const;
  // Device buffer for sampled ids, one per logit row.
  int32_t* sampled() const;

  // Benchmarks: large steps read the BF16 copies (when made, the default) or dequantize
  // each quantized matrix before its product (needs keep_dequantize_scratch), to measure one
  // against the other.
  void use_bf16_shadow(bool on) { use_shadow_ = on; }
  bool has_bf16_shadow() const { return options_.bf16_shadow; }
  size_t bf16_shadow_bytes() const { return shadow_bytes_; }  // included in weight_bytes()

  // Tests and benchmarks: runs a step and copies the logits into `out` (blocks on `s`).
  void forward(const step_input& in, stream& s, step_output& out);

 private:
  struct layer {
    device_buffer attn_norm, ffn_norm;
    device_buffer bq, bk, bv;                     // qwen2 (empty when the file has none)
    device_buffer q_norm, k_norm;                 // qwen3, gemma3: per-head RMSNorm weights
    device_buffer post_attn_norm, post_ffn_norm;  // gemma3
    std::vector<device_matrix> qkv;               // q, k, v in order, stacked where their types agree
    std::vector<device_matrix> gate_up;           // gate, up
    device_matrix wo, w_down;
  };
  // The device matrices of `parts` (consecutive source matrices reading one input) stacked
  // by gpu/plan/matrix_stacks.h; `fill` allocates and fills each one's bytes given the
  // indexes of the parts it holds.
  using fill_fn = std::function<void(device_matrix&, const std::vector<size_t>&)>;
  std::vector<device_matrix> make_stacks(const std::vector<matrix_part>& parts, const std::string& what,
                                         const fill_fn& fill);
  // Every weight matrix the model holds (token_embd, output when untied, then each layer's).
  void for_each_device_matrix(const std::function<void(device_matrix&)>& fn);
  // y_i = W_i x for every part of every matrix in `ms` (which all read x [n_tok][cols]):
  // x quantized once for the quantized ones when the step is small enough for the GEMV.
  void project(const device_matrix* const* ms, size_t n, const float* x, int32_t n_tok, float* const* outs,
               stream_handle s);
  void project(const std::vector<device_matrix>& ms, const float* x, int32_t n_tok, float* const* outs,
               stream_handle s);
  float* fbuf(size_t offset) const { return reinterpret_cast<float*>(static_cast<char*>(work_.data()) + offset); }
  int32_t* ibuf(size_t offset) const { return reinterpret_cast<int32_t*>(static_cast<char*>(work_.data()) + offset); }
  kv_layer kv_of(uint32_t l) const;
  // The copy of the packed inputs and every kernel of a packed step (captured as a graph
  // for decode steps); n_tiles > 0: attention by the tiled prefill kernel over that many
  // tiles (staged with the inputs).
  void enqueue_packed(const packed_step& ps, const pinned_buffer& stage, int32_t n_tiles, stream_handle s);
  void check_shape();
  // Workspace, KV pool, GEMM scratch and staging, once the weights are on the device.
  void finish_setup(size_t max_quant_weight_elems);
  void matmul(const device_matrix& w, const float* x, int32_t n_tok, float* y, stream_handle s);
  // The feed-forward hook of a dense layer: h = W_down (act(W_gate h) * (W_up h)).
  void enqueue_ffn_dense(const layer& w, float* h, int32_t nt, stream_handle s);

  model_config config_;
  gpu_model_options options_;
  std::vector<layer> layers_;
  device_matrix token_embd_, output_;
  device_buffer output_norm_, rope_freqs_;
  bool tied_ = false;
  size_t weight_bytes_ = 0;

  int32_t n_blocks_ = 0;  // block n_blocks_ is the scratch block of padded graph rows
  device_buffer kv_;      // [n_layer][K | V][n_blocks + 1][n_head_kv][block_tokens][head_dim] f16
  workspace_plan plan_;
  device_buffer work_;
  std::vector<pinned_buffer> staging_;  // the integer inputs of a step, [tokens .. sampled)
  int sm_count_ = 0;
  std::unique_ptr<gemm_engine> gemm_;
  std::unique_ptr<graph_cache<cuda_graph>> graphs_;  // null: eager only
  graph_counts graph_counts_;
  bool use_shadow_ = true;
  size_t shadow_bytes_ = 0;
};

}  // namespace tandem::gpu
