// The per-step inputs of device sampling (plain C++, no CUDA): each logit row's sampling
// parameters, its penalty parameters and the tokens it has seen (CSR, for
// launch_penalties), packed so that ONE host-to-device copy carries them:
//
//   [sample_params R][penalty_params R][offsets R+1 i32][tokens N i32][counts N i32]
//
// The parameter structs live in gpu/kernels.h; their sizes are passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::gpu {

struct sampling_layout {
  size_t params = 0, penalties = 0, offsets = 0, tokens = 0, counts = 0;  // byte offsets
  size_t total = 0;
};

// Every part 16-byte aligned (the parameter structs hold 8-byte fields).
sampling_layout plan_sampling_inputs(size_t rows, size_t entries, size_t param_bytes, size_t penalty_bytes);

// Rows of (token, count) pairs: row r is [offsets[r], offsets[r + 1]).
class penalty_csr {
 public:
  void clear();
  // The distinct tokens of `history` in ascending order with their counts; ids outside
  // [0, n_vocab) are dropped, as the CPU sampler drops them.
  void add_row(std::span<const int32_t> history, int32_t n_vocab);
  void add_empty_row() { offsets_.push_back(static_cast<int32_t>(tokens_.size())); }

  size_t rows() const { return offsets_.size() - 1; }
  size_t entries() const { return tokens_.size(); }
  const std::vector<int32_t>& offsets() const { return offsets_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& counts() const { return counts_; }

 private:
  std::vector<int32_t> offsets_{0}, tokens_, counts_;
  std::vector<int32_t> sorted_;  // scratch
};

}  // namespace tandem::gpu
