#include "engine/pooling/pooling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tandem {

std::string_view to_string(pooling_type t) {
  switch (t) {
    case pooling_type::none:
      return "none";
    case pooling_type::mean:
      return "mean";
    case pooling_type::cls:
      return "cls";
    case pooling_type::last:
      return "last";
    case pooling_type::rank:
      return "rank";
  }
  return "none";
}

std::optional<pooling_type> parse_pooling(std::string_view name) {
  for (auto t : {pooling_type::none, pooling_type::mean, pooling_type::cls, pooling_type::last, pooling_type::rank}) {
    if (name == to_string(t)) return t;
  }
  return std::nullopt;
}

std::optional<pooling_type> file_pooling(const gguf::file& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) return std::nullopt;
  const auto v = f.get_int(*arch + ".pooling_type");
  if (!v) return std::nullopt;
  // llama.cpp's LLAMA_POOLING_TYPE_UNSPECIFIED (-1) means "the model's default": none here.
  if (*v == -1) return pooling_type::none;
  if (*v < 0 || *v > 4) {
    throw gguf::format_error(*arch + ".pooling_type is " + std::to_string(*v) + "; llama.cpp's types are 0 to 4");
  }
  return static_cast<pooling_type>(*v);
}

pooling_type row_pooling(pooling_type t, bool causal) {
  if (t == pooling_type::rank) return causal ? pooling_type::last : pooling_type::cls;
  return t;
}

void pooled_rows::reset(pooling_type rows, int64_t width) {
  type_ = rows == pooling_type::rank ? pooling_type::last : rows;
  width_ = width;
  sum_.clear();
  row_.clear();
  n_ = 0;
}

void pooled_rows::add(std::span<const float> rows, uint32_t start_pos) {
  if (type_ == pooling_type::none || width_ <= 0 || rows.empty()) return;
  if (rows.size() % static_cast<size_t>(width_) != 0) {
    throw std::invalid_argument("pooled_rows: rows of " + std::to_string(rows.size()) +
                                " floats are not whole rows of width " + std::to_string(width_));
  }
  if (start_pos == 0) reset(type_, width_);
  const auto w = static_cast<size_t>(width_);
  const size_t n = rows.size() / w;
  switch (type_) {
    case pooling_type::mean:
      sum_.resize(w, 0.0);
      for (size_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < w; ++i) sum_[i] += rows[r * w + i];
      }
      break;
    case pooling_type::cls:
      if (start_pos == 0) row_.assign(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(w));
      break;
    default:  // last
      row_.assign(rows.end() - static_cast<std::ptrdiff_t>(w), rows.end());
      break;
  }
  n_ += static_cast<uint32_t>(n);
}

std::vector<float> pooled_rows::take() {
  std::vector<float> out;
  if (n_ == 0) return out;
  if (type_ == pooling_type::mean) {
    out.resize(sum_.size());
    for (size_t i = 0; i < sum_.size(); ++i) out[i] = static_cast<float>(sum_[i] / n_);
  } else {
    out = std::move(row_);
  }
  reset(type_, width_);
  return out;
}

void l2_normalize(std::span<float> x) {
  double sum = 0.0;
  for (float v : x) sum += static_cast<double>(v) * v;
  const double norm = std::sqrt(sum);
  const float scale = norm > 0.0 ? static_cast<float>(1.0 / norm) : 0.0f;
  for (float& v : x) v *= scale;
}

std::vector<float> embedding_output(std::span<const float> pooled, uint32_t dimensions) {
  if (dimensions > pooled.size()) {
    throw std::invalid_argument("dimensions " + std::to_string(dimensions) + " is more than the model's " +
                                std::to_string(pooled.size()));
  }
  const size_t n = dimensions == 0 ? pooled.size() : dimensions;
  std::vector<float> out(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  l2_normalize(out);
  return out;
}

}  // namespace tandem
