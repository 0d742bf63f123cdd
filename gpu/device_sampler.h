// Device sampling of one step (plain C++, no CAF): each logit row's sampling parameters, its
// adjusted tokens (logit bias, and the seen tokens when it has penalties) and whether it
// wants log-probabilities, packed into pinned memory (gpu/plan/sampling_inputs.h,
// plan_device_sampling), carried by ONE host-to-device copy; then launch_adjust_logits (when
// a row has bias or penalties), launch_sample (launch_verify when a row has a draft), and
// launch_logprobs (when a row asks). Token ids come back through the caller's copy; the
// asked-for log-probabilities and the drafts' verdicts through this sampler's pinned
// buffers, read with logprobs() and verdict() once the step has completed.
//
// Buffers are per slot (the caller's ticket slot): a slot's buffers are rewritten, or grown,
// only once the step that last used the slot has completed on the stream.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpu/device.h"
#include "gpu/kernels.h"
#include "gpu/plan/sampling_inputs.h"

namespace tandem::gpu {

class device_sampler {
 public:
  explicit device_sampler(uint32_t slots = 2) : slots_(slots) {}

  // A step of n_rows logit rows: every row greedy, without bias, penalties or
  // log-probabilities until set.
  void begin(int32_t n_rows);
  void set_row(int32_t row, const sample_params& p) { params_[static_cast<size_t>(row)] = p; }
  // Penalties over `history` (it must stay valid until enqueue). A repetition penalty <= 0
  // counts as off, as in the CPU sampler.
  void set_penalties(int32_t row, const penalty_params& p, std::span<const int32_t> history);
  // Logit bias: values[i] added to token ids[i] before the penalties (both must stay valid
  // until enqueue; ids outside the vocabulary are ignored, a repeated id's last value counts).
  void set_logit_bias(int32_t row, std::span<const int32_t> ids, std::span<const float> values);
  // Log-probabilities of the row's raw logits: of the sampled token, and of the top_n best
  // (clamped to [0, kMaxTopLogprobs]).
  void set_logprobs(int32_t row, int32_t top_n);
  // Speculative verification: the row's drafted token (its verdict, and a draw without it,
  // come back: launch_verify); -1 marks a bonus row, which draws as usual but has a verdict.
  void set_draft(int32_t row, int32_t token);

  // Bias and penalties in place on logits [n_rows][n_vocab], one id per row into out, then
  // the log-probabilities asked for (the adjusted logits are restored to their raw values in
  // those rows first).
  void enqueue(float* logits, int32_t n_vocab, int32_t* out, uint32_t slot, stream_handle s);

  // The log-probabilities of a row set_logprobs() asked for, once the step enqueued on
  // `slot` has completed (valid until that slot is enqueued again).
  const row_logprobs& logprobs(uint32_t slot, int32_t row) const;
  // The verdict of a row of a step with drafts, under the same conditions.
  const draft_verdict& verdict(uint32_t slot, int32_t row) const;

 private:
  struct slot_buffers {
    pinned_buffer host;
    device_buffer dev;
    pinned_buffer logprobs;  // rows x row_logprobs, copied back
    pinned_buffer verdicts;  // rows x draft_verdict, copied back
  };
  uint32_t slots_;
  std::vector<slot_buffers> buffers_;
  int32_t n_rows_ = 0;
  std::vector<sample_params> params_;
  std::vector<penalty_params> penalties_;
  std::vector<std::span<const int32_t>> histories_;
  std::vector<std::span<const int32_t>> bias_ids_;
  std::vector<std::span<const float>> bias_values_;
  std::vector<int32_t> top_n_;
  std::vector<int32_t> drafts_;
  bool any_adjust_ = false, any_logprobs_ = false, any_draft_ = false;
  logit_adjust_csr csr_;
};

}  // namespace tandem::gpu
