// What a drafted or batched token costs this machine at the moment, for the benchmarks.
//
// A one-token step is bound by reading the weights; every further token of a step is
// compute. On this shared VM the compute slows by up to half for minutes at a time (other
// tenants) while the one-token step hardly moves, and both speculative decoding's gain and
// continuous batching's gain are that difference. So benchmarks record, next to each paired
// figure,
//
//   extra = (t(9 tokens) - t(1 token)) / (8 t(1 token))
//
// medians over alternating steps of one sequence at position 300, on a separate copy of the
// model: the lower, the more a draft (or another stream in the batch) saves.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "median.h"

namespace tandem::bench {

class compute_probe {
 public:
  explicit compute_probe(int threads) {
    model_options o;
    o.n_threads = threads;
    model_ = model::open(default_model_path(), o);
    cache_.emplace(model_->config(), kv_pool_options{16, kContext + 64, 0});
    alloc_.emplace(cache_->n_blocks());
    std::vector<int32_t> prompt(kContext);
    for (int i = 0; i < kContext; ++i) prompt[i] = 1 + (i * 37) % (model_->config().n_vocab - 2);
    seq_step st{1, prompt, 0, {}, false};
    alloc_->reserve(st.blocks, kContext + 16, cache_->block_tokens());
    in_.seqs.push_back(st);
    model_->forward(in_, *cache_, out_);
  }

  // The figure above, from 12 steps of each size.
  double measure() {
    std::vector<double> t1, t9;
    for (int r = 0; r < 12; ++r) {
      t1.push_back(step_ms(1));
      t9.push_back(step_ms(9));
    }
    const double a = median(t1), b = median(t9);
    return (b - a) / (8 * a);
  }

 private:
  static constexpr int kContext = 300;
  double step_ms(int tokens) {
    auto& s = in_.seqs[0];
    s.tokens.assign(static_cast<size_t>(tokens), 5);
    s.start_pos = kContext;  // the same positions every time: nothing grows
    s.want_all_logits = true;
    s.decode_numerics = true;
    const auto t0 = std::chrono::steady_clock::now();
    model_->forward(in_, *cache_, out_);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::unique_ptr<model> model_;
  std::optional<kv_pool> cache_;
  std::optional<kv_block_allocator> alloc_;
  step_input in_;
  step_output out_;
};

}  // namespace tandem::bench
