#include "engine/model/generator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace tandem {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

generation_stats generate(model& m, kv_pool& cache, kv_block_allocator& allocator, std::span<const int32_t> prompt,
                          const generation_options& options, const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  generation_stats stats;
  stats.prompt_tokens = static_cast<int32_t>(prompt.size());

  step_input in;
  in.seqs.resize(1);
  seq_step& seq = in.seqs[0];
  seq.seq = 1;
  const auto total = static_cast<int64_t>(prompt.size()) + options.max_tokens;
  if (!allocator.reserve(seq.blocks, total, cache.block_tokens())) {
    throw std::runtime_error("generate: the KV pool is too small for " + std::to_string(total) + " tokens");
  }

  std::vector<int32_t> history(prompt.begin(), prompt.end());
  sampler s(options.sampling);
  step_output out;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const auto chunk = static_cast<size_t>(std::max(1, options.prefill_chunk));
    for (size_t start = 0; start < prompt.size(); start += chunk) {
      const size_t end = std::min(prompt.size(), start + chunk);
      seq.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(start),
                        prompt.begin() + static_cast<std::ptrdiff_t>(end));
      seq.start_pos = static_cast<int32_t>(start);
      m.forward(in, cache, out);
    }
    stats.prompt_seconds = seconds_since(t0);

    const auto t1 = std::chrono::steady_clock::now();
    for (int32_t i = 0; i < options.max_tokens; ++i) {
      const sample_result r = s.sample(out.last(0), history);
      if (r.token < 0 || r.is_stop) {
        stats.stopped = r.is_stop;
        break;
      }
      ++stats.generated_tokens;
      history.push_back(r.token);
      if (!on_token(r.token)) break;
      if (i + 1 == options.max_tokens) break;
      seq.tokens = {r.token};
      seq.start_pos = static_cast<int32_t>(history.size()) - 1;
      m.forward(in, cache, out);
    }
    stats.decode_seconds = seconds_since(t1);
  } catch (...) {
    allocator.release(seq.blocks);
    throw;
  }
  allocator.release(seq.blocks);
  return stats;
}

}  // namespace tandem
