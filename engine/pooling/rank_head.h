// A reranker's classification head over its pooled hidden state (llama.cpp's pooling type
// rank), read from the file:
//
//   h = tanh(cls.weight p + cls.bias)          when the file has cls.weight (BERT-style rerankers)
//   s = cls.output.weight h + cls.output.bias  when it has cls.output.weight (n_cls_out rows:
//                                              Qwen3-Reranker's are the LM head's "yes" and "no")
//   s = softmax(s)                             for qwen3 (its two labels' probabilities)
//
// The relevance score is s[0], as llama-server reports it. Small: the matrices are decoded
// to floats once, at load.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/gguf/gguf.h"

namespace tandem {

class rank_head {
 public:
  // nullopt when the file has neither cls.weight nor cls.output.weight (then rank pooling
  // has nothing to score with). Throws gguf::format_error for shapes that do not fit n_embd.
  static std::optional<rank_head> from_gguf(const gguf::file& f, int64_t n_embd);

  // The head's outputs for one pooled vector [n_embd]: n_out() values.
  std::vector<float> scores(std::span<const float> pooled) const;
  int64_t n_out() const { return n_out_; }

 private:
  struct dense {
    std::vector<float> w;  // [rows][cols]
    std::vector<float> b;  // [rows] or empty
    int64_t rows = 0, cols = 0;
    std::vector<float> apply(std::span<const float> x) const;
  };
  std::optional<dense> cls_;  // then tanh
  std::optional<dense> out_;
  bool softmax_ = false;
  int64_t n_out_ = 0;
};

}  // namespace tandem
