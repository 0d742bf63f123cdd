// A LoRA adapter as llama.cpp's convert_lora_to_gguf writes it: a GGUF file with
// general.type "adapter", adapter.type "lora", adapter.lora.alpha, general.architecture equal
// to the base's, and for each adapted matrix W of the base (rows x cols; GGUF ne = [cols, rows])
// two tensors:
//
//   <W's name>.lora_a   ne = [cols, rank]   A: rank rows of cols
//   <W's name>.lora_b   ne = [rank, rows]   B: rows rows of rank
//
// The update of an input row x is  W x + s B (A x),  s = scale * alpha / rank, or scale alone
// when alpha is 0 (llama.cpp's rule; rank is B's ne[0], per matrix). Tensors named
// "*_norm.weight" are skipped, as llama.cpp does.
//
// Tandem applies updates to the matrices its forward pass hooks (model.cpp): each layer's
// attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, and the output head. A
// tensor for any other matrix (token_embd, a fused attn_qkv, an expert stack) is refused by
// name rather than silently ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tandem::lora {

// One adapted matrix.
struct matrix_update {
  kernels::weight_view a;                 // [rank rows][cols], read in the file (any type with a row kernel)
  kernels::weight_view b;                 // [rows][rank], read in the file (any type with a row kernel)
  std::vector<float> bt;                  // F16 B only: [rank][rows], B transposed, in float (rank * rows floats)
  tensor_type b_type = tensor_type::f32;  // B's type in the file: A x is rounded as B's activations are
  int64_t rank = 0;
  int64_t rows = 0;
  float alpha_scale = 1.0f;  // alpha / rank, or 1 when alpha is 0
};

// The matrices an adapter may change, in one index space: (layer, role) of a block, or the
// output head (layer -1).
bool hooked_role(matrix_role role);
size_t slot_of(int32_t layer, matrix_role role);  // layer -1: the head

class adapter {
 public:
  // Reads and checks `path` against the base model; throws gguf::format_error naming the
  // file and, where one is at fault, the tensor. What it allocates is bounded by the file:
  // B in float (at most 4 bytes per element the file holds), and one entry per base matrix.
  static std::shared_ptr<const adapter> load(const std::filesystem::path& path, const model_config& base_config,
                                             const model_weights& base_weights, const kernels::dot_kernels& k);
  // The same from a parsed file (tests build files in memory).
  static std::shared_ptr<const adapter> from_file(gguf::file file, const model_config& base_config,
                                                  const model_weights& base_weights, const kernels::dot_kernels& k);

  // The update of (layer, role), or null when the adapter leaves that matrix alone.
  const matrix_update* find(int32_t layer, matrix_role role) const {
    const size_t s = slot_of(layer, role);
    return s < index_.size() && index_[s] >= 0 ? &updates_[static_cast<size_t>(index_[s])] : nullptr;
  }
  float alpha() const { return alpha_; }
  size_t n_matrices() const { return updates_.size(); }
  int64_t max_rank() const { return max_rank_; }
  // gguf::model_identity of the file: what the prefix cache keys this adapter's KV by.
  uint64_t identity() const { return identity_; }

 private:
  explicit adapter(gguf::file f) : file_(std::move(f)) {}
  gguf::file file_;             // A is read in place from its mapping
  std::vector<int32_t> index_;  // slot -> updates_ index, -1 for none
  std::vector<matrix_update> updates_;
  float alpha_ = 0.0f;
  int64_t max_rank_ = 0;
  uint64_t identity_ = 0;
};

}  // namespace tandem::lora
