#include "engine/schedule/prompt_groups.h"

#include <algorithm>
#include <utility>

namespace tandem {

bool prompt_groups::join(uint64_t group, seq_id seq, std::span<const token_id> prompt, const step_planner& planner) {
  auto [g, fresh] = groups_.try_emplace(group);
  if (fresh) {
    g->second.leader = seq;
    return false;
  }
  const seq_id leader = g->second.leader;
  if (!planner.contains(leader) || planner.n_computed(leader) >= planner.n_prompt(leader)) return false;
  const auto& toks = planner.tokens(leader);
  if (planner.n_prompt(leader) != prompt.size() || !std::equal(prompt.begin(), prompt.end(), toks.begin())) {
    return false;
  }
  g->second.parked.push_back(seq);
  return true;
}

prompt_groups::released prompt_groups::ready(uint64_t group, seq_id leader, const step_planner& planner) {
  const auto g = groups_.find(group);
  if (g == groups_.end() || g->second.leader != leader || g->second.parked.empty()) return {};
  if (planner.n_computed(leader) < planner.n_prompt(leader)) return {};
  auto parked = std::exchange(g->second.parked, {});
  const size_t max = planner.config().max_num_seqs;
  const size_t slots = max > planner.n_running() ? max - planner.n_running() : 0;
  const auto split = parked.begin() + static_cast<std::ptrdiff_t>(std::min(slots, parked.size()));
  return {{parked.begin(), split}, {split, parked.end()}};
}

std::vector<seq_id> prompt_groups::leave(uint64_t group, seq_id seq) {
  const auto g = groups_.find(group);
  if (g == groups_.end()) return {};
  auto& parked = g->second.parked;
  if (const auto it = std::find(parked.begin(), parked.end(), seq); it != parked.end()) {
    parked.erase(it);
    return {};
  }
  if (g->second.leader != seq) return {};
  auto freed = std::move(parked);
  groups_.erase(g);
  return freed;
}

}  // namespace tandem
