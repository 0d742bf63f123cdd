// Embeddings from a model's last hidden states (engine/model's forward pass with
// seq_step::want_hidden): the pooling a file declares (<arch>.pooling_type, llama.cpp's
// numbering) or the server is told, the L2 normalisation llama-server and vLLM apply, and
// Matryoshka truncation.
//
//   hidden rows (after the output norm, before the head), chunk by chunk
//     -> pooled_rows: mean of every row | the first row (cls) | the last row (last)
//     -> embedding_output: the first `dimensions` values, divided by their L2 norm
//   rank (rerankers): the row of cls (bidirectional encoders) or last (causal models)
//     -> rank_head (rank_head.h): cls.weight + tanh, cls.output -> one score per label
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"

namespace tandem {

// llama.cpp's llama_pooling_type values, as GGUF files store them.
enum class pooling_type : uint8_t { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };

std::string_view to_string(pooling_type t);
// "none", "mean", "cls", "last", "rank"; nullopt for anything else.
std::optional<pooling_type> parse_pooling(std::string_view name);
// The file's <general.architecture>.pooling_type; nullopt when absent. Throws
// gguf::format_error for a value outside llama.cpp's numbering.
std::optional<pooling_type> file_pooling(const gguf::file& f);

// Which hidden row a pooling reads: rank reads the last row of a causal model (Qwen3-Reranker)
// and the first of a bidirectional encoder, as llama.cpp decides (llm_graph_input_cls).
pooling_type row_pooling(pooling_type t, bool causal);

// One sequence's pooled hidden state, built from its rows as its prompt is computed, chunk
// by chunk (mean keeps a running sum). A chunk that starts at position 0 starts over (a
// sequence that was preempted is computed again from the start).
class pooled_rows {
 public:
  pooled_rows() = default;
  // rows: mean, cls or last (row_pooling's result; none pools nothing); width: the row's.
  pooled_rows(pooling_type rows, int64_t width) { reset(rows, width); }
  void reset(pooling_type rows, int64_t width);
  // rows [n][width]: the hidden states at positions start_pos, start_pos + 1, ...
  void add(std::span<const float> rows, uint32_t start_pos);
  // The pooled vector (mean: the sum over the rows seen, divided by their count); empty
  // when no row was added. Leaves the state empty.
  std::vector<float> take();
  uint32_t rows_seen() const { return n_; }

 private:
  pooling_type type_ = pooling_type::none;
  int64_t width_ = 0;
  std::vector<double> sum_;  // mean
  std::vector<float> row_;   // cls, last
  uint32_t n_ = 0;
};

// x / ||x||_2 in place, the norm summed in double (llama.cpp's common_embd_normalize with
// embd_normalize 2); a zero vector stays zero.
void l2_normalize(std::span<float> x);

// The vector a client gets: the first `dimensions` values (0: all) of the pooled vector,
// L2-normalised (Matryoshka truncation, then renormalisation, as vLLM and sentence-transformers
// do). Throws std::invalid_argument when dimensions exceeds the width.
std::vector<float> embedding_output(std::span<const float> pooled, uint32_t dimensions);

}  // namespace tandem
