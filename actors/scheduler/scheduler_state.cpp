#include "actors/scheduler/scheduler_state.h"

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
  const auto& info = seqs.at(id);
  // The deadline counts from the sequence's arrival here (tokenizing before is microseconds).
  const double deadline = r.slo_ttft_ms > 0 ? ms_between(epoch, info.enqueued) + r.slo_ttft_ms : 0;
  tick();
  planner->add(id, r.tenant, r.weight, r.prompt, salt_of(id), r.kv_cache_share, {r.priority, deadline});
  if (scores_prompt(id)) planner->limit_chunk(id, planner->config().scored_chunk);
  std::vector<uint32_t> atomic;
  for (const embedding_rows& e : r.media) {
    if (!e.bidirectional) continue;
    atomic.push_back(static_cast<uint32_t>(e.offset));
    atomic.push_back(static_cast<uint32_t>(e.offset + e.count));
  }
  if (!atomic.empty()) planner->set_atomic_runs(id, std::move(atomic));
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
    step.started.push_back(
        {s, r.sampling, planner->n_prompt(s), r.grammar, r.pooling, r.adapter_id, r.adapter_scale, r.media});
  }
  return step;
}

std::optional<token_batch> scheduler_state::slo_refusal(const sequence_request& req) const {
  if (!req.slo_reject || req.slo_ttft_ms <= 0) return std::nullopt;
  const double predicted = planner->predicted_ttft_ms(req.priority, static_cast<uint32_t>(req.prompt.size()));
  if (predicted <= req.slo_ttft_ms) return std::nullopt;
  token_batch b;
  b.seq = req.id;
  b.finished = true;
  b.reason = finish_reason::error;
  b.status = 503;
  b.error = "the queue ahead predicts a first token in " + std::to_string(static_cast<int64_t>(predicted)) +
            " ms, past this request's x-slo-ttft-ms of " + std::to_string(static_cast<int64_t>(req.slo_ttft_ms)) +
            " ms (x-slo-reject: true); retry later or at a more urgent priority";
  return b;
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
