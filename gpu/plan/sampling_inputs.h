// The per-step inputs of device sampling (plain C++, no CUDA): each logit row's sampling
// and penalty parameters, and the tokens whose logits change before sampling (logit bias,
// then penalties for the tokens seen) as one CSR of (token, count, bias) entries, packed so
// that ONE host-to-device copy carries them; the device keeps the raw logits of the
// adjusted tokens (log-probabilities are of the raw row):
//
//   copied:      [sample_params R][penalty_params R][top_n R i32][drafts R i32]
//                [offsets R+1 i32][tokens N i32][counts N i32][bias N f32]
//   device only: [saved N f32][logprobs R x logprob_bytes][verdicts R x verdict_bytes]
//
// The parameter structs live in gpu/kernels.h; their sizes are passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::gpu {

struct device_sampling_layout {
  // copied
  size_t params = 0, penalties = 0, top_n = 0, drafts = 0, offsets = 0, tokens = 0, counts = 0, bias = 0;
  size_t inputs = 0;  // bytes copied
  // device only
  size_t saved = 0, logprobs = 0, verdicts = 0;
  size_t total = 0;
};

// Every part 16-byte aligned; the copied parts first, so one copy of `inputs` bytes fills them.
device_sampling_layout plan_device_sampling(size_t rows, size_t entries, size_t param_bytes, size_t penalty_bytes,
                                            size_t logprob_bytes, size_t verdict_bytes);

// Per row, the tokens whose logits change before sampling, in ascending order, each once:
// count = its occurrences in the history (0: biased only), bias = its logit bias (0: none).
// The CPU sampler adds the bias, then penalises the tokens of the history; per token that is
// bias then penalty, which a kernel applies entry by entry.
class logit_adjust_csr {
 public:
  void clear();
  // Ids outside [0, n_vocab) are dropped, as the CPU sampler drops them; a later bias for the
  // same token replaces an earlier one (the CPU sampler keeps the bias in a map).
  void add_row(std::span<const int32_t> history, std::span<const int32_t> bias_ids, std::span<const float> bias_values,
               int32_t n_vocab);

  size_t rows() const { return offsets_.size() - 1; }
  size_t entries() const { return tokens_.size(); }
  const std::vector<int32_t>& offsets() const { return offsets_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& counts() const { return counts_; }
  const std::vector<float>& bias() const { return bias_; }

 private:
  std::vector<int32_t> offsets_{0}, tokens_, counts_;
  std::vector<float> bias_;
  std::vector<int32_t> sorted_;                    // scratch: the history's valid ids
  std::vector<std::pair<int32_t, float>> biased_;  // scratch: (id, bias), the last per id
};

}  // namespace tandem::gpu
