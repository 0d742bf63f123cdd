#include "gpu/device_sampler.h"

#include <cstring>

namespace tandem::gpu {

void device_sampler::begin(int32_t n_rows) {
  n_rows_ = n_rows;
  params_.assign(static_cast<size_t>(n_rows), sample_params{0.0f, 0.0f, 0, 0});
  penalties_.assign(static_cast<size_t>(n_rows), penalty_params{});
  histories_.assign(static_cast<size_t>(n_rows), {});
  any_penalty_ = false;
}

void device_sampler::set_penalties(int32_t row, const penalty_params& p, std::span<const int32_t> history) {
  penalty_params q = p;
  if (!(q.repetition > 0.0f)) q.repetition = 1.0f;
  if (q.repetition == 1.0f && q.frequency == 0.0f && q.presence == 0.0f) return;
  penalties_[static_cast<size_t>(row)] = q;
  histories_[static_cast<size_t>(row)] = history;
  any_penalty_ = true;
}

void device_sampler::enqueue(float* logits, int32_t n_vocab, int32_t* out, uint32_t slot, stream_handle s) {
  if (n_rows_ <= 0) return;
  const auto rows = static_cast<size_t>(n_rows_);
  csr_.clear();
  if (any_penalty_) {
    for (const auto& h : histories_) csr_.add_row(h, n_vocab);  // empty history: empty row
  }
  const size_t entries = csr_.entries();
  const sampling_layout l = plan_sampling_inputs(rows, entries, sizeof(sample_params), sizeof(penalty_params));
  if (buffers_.size() < slots_) buffers_.resize(slots_);
  slot_buffers& b = buffers_[slot % slots_];
  if (b.host.bytes() < l.total) {  // grown with headroom; the slot's last step is done
    b.host = pinned_buffer(l.total * 2);
    b.dev = device_buffer(l.total * 2);
  }
  auto* base = b.host.as<char>();
  std::memcpy(base + l.params, params_.data(), rows * sizeof(sample_params));
  size_t bytes = l.params + rows * sizeof(sample_params);
  if (any_penalty_) {
    std::memcpy(base + l.penalties, penalties_.data(), rows * sizeof(penalty_params));
    std::memcpy(base + l.offsets, csr_.offsets().data(), (rows + 1) * sizeof(int32_t));
    std::memcpy(base + l.tokens, csr_.tokens().data(), entries * sizeof(int32_t));
    std::memcpy(base + l.counts, csr_.counts().data(), entries * sizeof(int32_t));
    bytes = l.total;
  }
  copy_to_device_async(b.dev.data(), b.host.data(), bytes, s);
  auto* dev = b.dev.as<char>();
  if (any_penalty_) {
    launch_penalties(logits, n_rows_, n_vocab, reinterpret_cast<const int32_t*>(dev + l.offsets),
                     reinterpret_cast<const int32_t*>(dev + l.tokens), reinterpret_cast<const int32_t*>(dev + l.counts),
                     reinterpret_cast<const penalty_params*>(dev + l.penalties), s);
  }
  launch_sample(logits, reinterpret_cast<const sample_params*>(dev + l.params), n_rows_, n_vocab, out, s);
}

}  // namespace tandem::gpu
