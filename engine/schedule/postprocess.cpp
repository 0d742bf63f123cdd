#include "engine/schedule/postprocess.h"

#include <algorithm>
#include <utility>

namespace tandem {

completed_step complete_step(step_planner& planner, const planned_seq& p, std::span<const token_id> emitted,
                             uint32_t block_size) {
  completed_step out;
  out.n_total = static_cast<uint32_t>(planner.tokens(p.seq).size());
  planner.complete(p, emitted);
  const uint32_t computed = planner.n_computed(p.seq);
  const uint32_t n_prompt = planner.n_prompt(p.seq);
  if (p.start_pos < n_prompt) out.prompt_tokens = std::min(computed, n_prompt) - p.start_pos;
  // The prefix index never saw the rejected drafts' positions.
  if (!p.draft.empty()) out.trim_to = static_cast<uint32_t>(planner.tokens(p.seq).size());
  if (computed / block_size != p.start_pos / block_size) {
    const auto unsent = planner.take_unsent(p.seq);
    out.commit = true;
    out.unsent.assign(unsent.begin(), unsent.end());
    out.computed = computed;
  }
  return out;
}

step_tokens postprocess(std::span<const token_id> emitted, const output_limits& limits, uint32_t n_total,
                        output_state& state) {
  step_tokens out;
  const uint32_t n_generated = state.n_generated;
  const auto forced = std::exchange(state.forced, {});
  if (limits.max_new_tokens == 0) {  // the prompt only (scored, with echo): nothing is output
    out.end = output_end::length;
    return out;
  }
  if (emitted.empty()) {
    out.end = output_end::stop;
    return out;
  }
  const auto reached = [&](uint32_t generated, uint32_t total) {
    return generated >= limits.max_new_tokens || (limits.max_total_tokens > 0 && total >= limits.max_total_tokens);
  };
  for (const token_id tok : emitted) {
    ++out.n_generated;
    if (std::find(limits.stop_token_ids.begin(), limits.stop_token_ids.end(), tok) != limits.stop_token_ids.end()) {
      out.end = output_end::stop;
      break;
    }
    out.tokens.push_back(tok);
    if (reached(n_generated + out.n_generated, n_total + out.n_generated)) {
      out.end = output_end::length;
      break;
    }
  }
  out.n_sampled = static_cast<uint32_t>(out.tokens.size());
  const auto n = static_cast<uint32_t>(forced.size());
  // Room for them and one more: the limits are not reached with them alone.
  if (out.end == output_end::none && n > 0 &&
      !reached(n_generated + out.n_generated + n, n_total + out.n_generated + n)) {
    out.tokens.insert(out.tokens.end(), forced.begin(), forced.end());
    out.n_generated += n;
  }
  state.n_generated += out.n_generated;
  return out;
}

}  // namespace tandem
