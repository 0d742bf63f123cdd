#include "actors/scheduler_state.h"

#include <string>

#include "engine/kv/cache_salt.h"

namespace tandem {

uint64_t scheduler_state::salt_of(seq_id id) const {
  const auto& r = seqs.at(id).req;
  // A sequence that scores its prompt computes every prompt position (a cached block would
  // skip its rows): a salt of its own, which no other sequence's blocks carry.
  const uint64_t input =
      scores_prompt(id) ? r.input_hash ^ (0x9e3779b97f4a7c15ull * (id + 1)) ^ salt_key : r.input_hash;
  return cache_salt({r.cache_group, model_identity, r.adapter, input}, salt_key);
}

void scheduler_state::add_to_planner(seq_id id) {
  const auto& r = seqs.at(id).req;
  planner->add(id, r.tenant, r.weight, r.prompt, salt_of(id), r.kv_cache_share);
  if (scores_prompt(id)) planner->limit_chunk(id, planner->config().scored_chunk);
}

device_step scheduler_state::device_step_of(step_plan_core& plan) {
  for (const auto& p : plan.seqs) {
    auto& info = seqs.at(p.seq);
    info.out.planned(p, ms_between(info.enqueued, clock_type::now()));
  }
  auto diff = mirror.diff(plan, *planner);
  device_step step{plan.step, {}, std::move(diff.seqs), plan.copies, plan.preempted, std::move(diff.released), {}};
  for (seq_id s : diff.started) {
    const auto& r = seqs.at(s).req;
    step.started.push_back({s, r.sampling, planner->n_prompt(s), r.grammar, r.pooling});
  }
  return step;
}

token_batch scheduler_state::refusal(const sequence_request& req) const {
  token_batch b;
  b.seq = req.id;
  b.finished = true;
  b.reason = finish_reason::error;
  if (req.prompt.size() >= capacity) {
    b.error = "the prompt has " + std::to_string(req.prompt.size()) + " tokens but the KV cache holds " +
              std::to_string(capacity) + "; start the server with a larger --kv-cache-tokens";
  }
  return b;
}

}  // namespace tandem
