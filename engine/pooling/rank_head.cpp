#include "engine/pooling/rank_head.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/gguf/quantize.h"

namespace tandem {
namespace {

// A matrix (or, with rows 1, a vector) of the file decoded to floats; nullopt when absent.
std::optional<std::vector<float>> read_floats(const gguf::file& f, const std::string& name, int64_t cols,
                                              int64_t& rows) {
  const gguf::tensor_info* t = f.find_tensor(name);
  if (t == nullptr) return std::nullopt;
  if (t->ne[0] != cols || t->ne[2] != 1 || t->ne[3] != 1) {
    throw gguf::format_error("tensor '" + name + "' has rows of " + std::to_string(t->ne[0]) + ", expected " +
                             std::to_string(cols));
  }
  rows = t->ne[1];
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const size_t row_bytes = t->nbytes / static_cast<size_t>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->type, t->data + static_cast<size_t>(r) * row_bytes, cols, out.data() + r * cols);
  }
  return out;
}

}  // namespace

std::vector<float> rank_head::dense::apply(std::span<const float> x) const {
  std::vector<float> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(w[r * cols + c]) * x[c];
    y[r] = static_cast<float>(acc) + (b.empty() ? 0.0f : b[r]);
  }
  return y;
}

std::optional<rank_head> rank_head::from_gguf(const gguf::file& f, int64_t n_embd) {
  rank_head h;
  auto layer = [&](const std::string& name, int64_t cols) -> std::optional<dense> {
    dense d;
    d.cols = cols;
    auto w = read_floats(f, name + ".weight", cols, d.rows);
    if (!w) return std::nullopt;
    d.w = std::move(*w);
    int64_t bias_rows = 0;
    if (const auto* bt = f.find_tensor(name + ".bias")) {
      if (bt->n_elements() != d.rows) throw gguf::format_error("tensor '" + name + ".bias' does not fit its weight");
      auto b = read_floats(f, name + ".bias", d.rows, bias_rows);
      d.b = std::move(*b);
    }
    return d;
  };
  h.cls_ = layer("cls", n_embd);
  h.out_ = layer("cls.output", h.cls_ ? h.cls_->rows : n_embd);
  if (!h.cls_ && !h.out_) return std::nullopt;
  h.n_out_ = h.out_ ? h.out_->rows : h.cls_->rows;
  h.softmax_ = f.get_string("general.architecture").value_or("") == "qwen3";
  return h;
}

std::vector<float> rank_head::scores(std::span<const float> pooled) const {
  std::vector<float> x(pooled.begin(), pooled.end());
  if (cls_) {
    x = cls_->apply(x);
    for (float& v : x) v = std::tanh(v);
  }
  if (out_) x = out_->apply(x);
  if (softmax_ && !x.empty()) {
    const float m = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float& v : x) sum += (v = std::exp(v - m));
    for (float& v : x) v = static_cast<float>(v / sum);
  }
  return x;
}

}  // namespace tandem
