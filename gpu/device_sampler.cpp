#include "gpu/device_sampler.h"

#include <algorithm>
#include <cstring>

namespace tandem::gpu {

void device_sampler::begin(int32_t n_rows) {
  n_rows_ = n_rows;
  const auto rows = static_cast<size_t>(n_rows);
  params_.assign(rows, sample_params{0.0f, 0.0f, 0, 0});
  penalties_.assign(rows, penalty_params{});
  histories_.assign(rows, {});
  bias_ids_.assign(rows, {});
  bias_values_.assign(rows, {});
  top_n_.assign(rows, -1);
  drafts_.assign(rows, -1);
  any_adjust_ = any_logprobs_ = any_draft_ = false;
}

void device_sampler::set_penalties(int32_t row, const penalty_params& p, std::span<const int32_t> history) {
  penalty_params q = p;
  if (!(q.repetition > 0.0f)) q.repetition = 1.0f;
  if (q.repetition == 1.0f && q.frequency == 0.0f && q.presence == 0.0f) return;
  penalties_[static_cast<size_t>(row)] = q;
  histories_[static_cast<size_t>(row)] = history;
  any_adjust_ = any_adjust_ || !history.empty();
}

void device_sampler::set_logit_bias(int32_t row, std::span<const int32_t> ids, std::span<const float> values) {
  bias_ids_[static_cast<size_t>(row)] = ids;
  bias_values_[static_cast<size_t>(row)] = values;
  any_adjust_ = any_adjust_ || (!ids.empty() && !values.empty());
}

void device_sampler::set_logprobs(int32_t row, int32_t top_n) {
  top_n_[static_cast<size_t>(row)] = std::clamp(top_n, 0, kMaxTopLogprobs);
  any_logprobs_ = true;
}

void device_sampler::set_draft(int32_t row, int32_t token) {
  drafts_[static_cast<size_t>(row)] = token;
  any_draft_ = true;
}

const draft_verdict& device_sampler::verdict(uint32_t slot, int32_t row) const {
  return buffers_[slot % slots_].verdicts.as<draft_verdict>()[row];
}

const row_logprobs& device_sampler::logprobs(uint32_t slot, int32_t row) const {
  return buffers_[slot % slots_].logprobs.as<row_logprobs>()[row];
}

void device_sampler::enqueue(float* logits, int32_t n_vocab, int32_t* out, uint32_t slot, stream_handle s) {
  if (n_rows_ <= 0) return;
  const auto rows = static_cast<size_t>(n_rows_);
  csr_.clear();
  if (any_adjust_) {
    for (size_t r = 0; r < rows; ++r) csr_.add_row(histories_[r], bias_ids_[r], bias_values_[r], n_vocab);
  }
  const size_t entries = csr_.entries();
  const bool adjust = entries > 0;
  const device_sampling_layout l = plan_device_sampling(rows, entries, sizeof(sample_params), sizeof(penalty_params),
                                                        sizeof(row_logprobs), sizeof(draft_verdict));
  if (buffers_.size() < slots_) buffers_.resize(slots_);
  slot_buffers& b = buffers_[slot % slots_];
  if (b.host.bytes() < l.inputs || b.dev.bytes() < l.total) {  // grown with headroom; the slot's last step is done
    b.host = pinned_buffer(l.inputs * 2);
    b.dev = device_buffer(l.total * 2);
  }
  if (any_logprobs_ && b.logprobs.bytes() < rows * sizeof(row_logprobs)) {
    b.logprobs = pinned_buffer(rows * sizeof(row_logprobs) * 2);
  }
  if (any_draft_ && b.verdicts.bytes() < rows * sizeof(draft_verdict)) {
    b.verdicts = pinned_buffer(rows * sizeof(draft_verdict) * 2);
  }
  auto* base = b.host.as<char>();
  std::memcpy(base + l.params, params_.data(), rows * sizeof(sample_params));
  size_t bytes = l.params + rows * sizeof(sample_params);
  if (adjust || any_logprobs_ || any_draft_) {
    std::memcpy(base + l.penalties, penalties_.data(), rows * sizeof(penalty_params));
    std::memcpy(base + l.top_n, top_n_.data(), rows * sizeof(int32_t));
    std::memcpy(base + l.drafts, drafts_.data(), rows * sizeof(int32_t));
    if (adjust) {
      std::memcpy(base + l.offsets, csr_.offsets().data(), (rows + 1) * sizeof(int32_t));
      std::memcpy(base + l.tokens, csr_.tokens().data(), entries * sizeof(int32_t));
      std::memcpy(base + l.counts, csr_.counts().data(), entries * sizeof(int32_t));
      std::memcpy(base + l.bias, csr_.bias().data(), entries * sizeof(float));
    }
    bytes = l.inputs;
  }
  copy_to_device_async(b.dev.data(), b.host.data(), bytes, s);
  auto* dev = b.dev.as<char>();
  const auto* offsets = reinterpret_cast<const int32_t*>(dev + l.offsets);
  const auto* tokens = reinterpret_cast<const int32_t*>(dev + l.tokens);
  auto* saved = reinterpret_cast<float*>(dev + l.saved);
  if (adjust) {
    launch_adjust_logits(logits, n_rows_, n_vocab, offsets, tokens, reinterpret_cast<const int32_t*>(dev + l.counts),
                         reinterpret_cast<const float*>(dev + l.bias),
                         reinterpret_cast<const penalty_params*>(dev + l.penalties), saved, s);
  }
  const auto* params = reinterpret_cast<const sample_params*>(dev + l.params);
  if (any_draft_) {
    auto* verdicts = reinterpret_cast<draft_verdict*>(dev + l.verdicts);
    launch_verify(logits, params, reinterpret_cast<const int32_t*>(dev + l.drafts), n_rows_, n_vocab, out, verdicts, s);
    copy_to_host_async(b.verdicts.data(), verdicts, rows * sizeof(draft_verdict), s);
  } else {
    launch_sample(logits, params, n_rows_, n_vocab, out, s);
  }
  if (any_logprobs_) {
    auto* lp = reinterpret_cast<row_logprobs*>(dev + l.logprobs);
    launch_logprobs(logits, n_rows_, n_vocab, adjust ? offsets : nullptr, tokens, saved, out,
                    reinterpret_cast<const int32_t*>(dev + l.top_n), lp, s);
    copy_to_host_async(b.logprobs.data(), lp, rows * sizeof(row_logprobs), s);
  }
}

}  // namespace tandem::gpu
