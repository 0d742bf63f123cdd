// Device sampling of one step (plain C++, no CAF): each logit row's sampling parameters and,
// for rows with penalties, the tokens it has seen, packed into pinned memory
// (gpu/plan/sampling_inputs.h), carried by ONE host-to-device copy, then launch_penalties
// (only when a row has penalties) and launch_sample. Only token ids come back.
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

  // A step of n_rows logit rows: every row greedy and without penalties until set.
  void begin(int32_t n_rows);
  void set_row(int32_t row, const sample_params& p) { params_[static_cast<size_t>(row)] = p; }
  // Penalties over `history` (it must stay valid until enqueue). A repetition penalty <= 0
  // counts as off, as in the CPU sampler.
  void set_penalties(int32_t row, const penalty_params& p, std::span<const int32_t> history);

  // Penalties in place on logits [n_rows][n_vocab], then one id per row into out.
  void enqueue(float* logits, int32_t n_vocab, int32_t* out, uint32_t slot, stream_handle s);

 private:
  struct slot_buffers {
    pinned_buffer host;
    device_buffer dev;
  };
  uint32_t slots_;
  std::vector<slot_buffers> buffers_;
  int32_t n_rows_ = 0;
  std::vector<sample_params> params_;
  std::vector<penalty_params> penalties_;
  std::vector<std::span<const int32_t>> histories_;
  bool any_penalty_ = false;
  penalty_csr csr_;
};

}  // namespace tandem::gpu
