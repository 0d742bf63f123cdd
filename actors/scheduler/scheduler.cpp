#include "actors/scheduler/scheduler.h"

#include <memory>
#include <string>
#include <utility>

#include "actors/atoms.h"
#include "actors/scheduler/scheduler_state.h"

namespace tandem {
namespace {

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void kick(self_ptr self);

void deliver(self_ptr self, const streamer_actor& to, token_batch batch) {
  self->state.outbox.emplace_back(to, std::move(batch));
}

void flush_outbox(self_ptr self) {
  for (auto& [to, batch] : self->state.outbox) self->send(to, tokens_atom::value, std::move(batch));
  self->state.outbox.clear();
}

// Continues the loop after a result or an arrival; batches waiting in the outbox go out now
// unless a plan is being made (run_planned sends them right after the step).
void kick_and_flush(self_ptr self) {
  kick(self);
  if (!self->state.busy) flush_outbox(self);
}

// Once the leader's prompt is computed its parked choices go (engine/schedule/prompt_groups.h).
void fork_parked(self_ptr self, seq_id leader, uint64_t group) {
  auto& st = self->state;
  const auto go = st.groups.ready(group, leader, *st.planner);
  for (seq_id c : go.fork) {
    self->send(st.cache, fork_atom::value, leader, c, st.planner->n_prompt(leader));
    st.planner->add_forked(c, leader);
  }
  for (seq_id c : go.queue) st.add_to_planner(c);
}

// Ends a sequence: the streamer gets the final batch, blocks go back to the pool.
void finish(self_ptr self, seq_id seq, finish_reason reason, token_batch batch = {}) {
  auto& st = self->state;
  const auto it = st.seqs.find(seq);
  if (it == st.seqs.end()) return;
  batch.seq = seq;
  batch.finished = true;
  batch.reason = reason;
  deliver(self, it->second.req.streamer, std::move(batch));
  st.planner->remove(seq);
  for (seq_id c : st.groups.leave(it->second.req.prompt_group, seq)) st.add_to_planner(c);
  self->send(st.cache, release_atom::value, std::vector<seq_id>{seq});
  st.mirror.release(seq);
  if (st.spec) {
    self->send(st.drafter, forget_atom::value, std::vector<seq_id>{seq});
    st.spec->forget(seq);
  }
  st.seqs.erase(it);
}

void fail(self_ptr self, seq_id seq, std::string error) {
  token_batch b;
  b.error = std::move(error);
  finish(self, seq, finish_reason::error, std::move(b));
}

// A sampled step's tokens for the streamer; engine/schedule/postprocess.h decides what ends
// the sequence. lp: the step's log-probabilities when the request asked for them.
void emit(self_ptr self, seq_id seq, seq_info& info, std::span<const token_id> emitted, uint32_t n_total,
          const output_logprob* lp) {
  auto& st = self->state;
  const auto& r = info.req;
  auto out = postprocess(emitted, {r.max_new_tokens, r.max_total_tokens, r.stop_token_ids}, n_total, info.out);
  st.stats.generated_tokens += out.n_generated;
  if (!out.forced().empty()) st.planner->append_tokens(seq, out.forced());
  token_batch batch;
  if (lp) {
    batch.logprobs.assign(out.n_sampled, *lp);
    for (token_id t : out.forced()) batch.logprobs.push_back({t, 0.0f, 0, {}, {}});
  }
  if (!std::exchange(info.out.reported, true)) {
    batch.cached_tokens = info.out.cached_tokens;
    batch.queue_ms = info.out.queue_ms;
    if (r.sampling.prompt_logprobs >= 0) {  // the first token has no score: rank 0
      batch.prompt_logprobs.reserve(info.prompt_scores.size() + 1);
      batch.prompt_logprobs.push_back({r.prompt.front(), 0.0f, 0, {}, {}});
      for (auto& s : info.prompt_scores) batch.prompt_logprobs.push_back(std::move(s));
      info.prompt_scores.clear();
    }
  }
  batch.seq = seq;
  batch.tokens = std::move(out.tokens);
  if (out.end == output_end::none) return deliver(self, r.streamer, std::move(batch));
  finish(self, seq, out.end == output_end::stop ? finish_reason::stop : finish_reason::length, std::move(batch));
}

// An embedding sequence's prompt is computed: its pooled vector goes to its embedder in the
// final batch and its blocks go back (it needs no KV cache after the step).
void finish_pooled(self_ptr self, seq_id seq, seq_info& info, const std::vector<float>& pooled) {
  if (pooled.empty()) return fail(self, seq, "the device returned no pooled vector");
  token_batch batch;
  batch.embedding = pooled;
  batch.cached_tokens = info.out.cached_tokens;
  batch.queue_ms = info.out.queue_ms;
  finish(self, seq, finish_reason::stop, std::move(batch));
}

// Scores of prompt positions start_pos + 1, ... from a step of p; those already kept (a
// preempted sequence computes its prompt again) are skipped.
void keep_prompt_scores(seq_info& info, const planned_seq& p, const std::vector<output_logprob>& scores) {
  for (size_t j = 0; j < scores.size(); ++j) {
    const size_t pos = p.start_pos + 1 + j;               // the prompt position score j is of
    if (pos != info.prompt_scored + size_t{1}) continue;  // kept already
    info.prompt_scores.push_back(scores[j]);
    ++info.prompt_scored;
  }
}

// worker_failed: the step never came back (the device worker died); otherwise res.error is
// the worker's own report of a failed step.
void apply(self_ptr self, const device_step_result& res, bool worker_failed = false) {
  auto& st = self->state;
  const auto t0 = clock_type::now();
  const auto& plan = st.in_flight;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    const auto it = st.seqs.find(p.seq);
    if (it == st.seqs.end() || !st.planner->contains(p.seq)) continue;  // aborted meanwhile
    if (!res.error.empty()) {
      fail(self, p.seq,
           worker_failed ? "the device worker failed (" + res.error + ") and was restarted"
                         : "the forward pass failed: " + res.error);
      continue;
    }
    const auto& emitted = res.emitted[i];
    auto done = complete_step(*st.planner, p, emitted, st.block_size);
    st.mirror.emitted(p.seq, static_cast<uint32_t>(emitted.size()));
    if (st.spec) st.spec->completed(p, emitted);
    auto& info = it->second;
    fork_parked(self, p.seq, info.req.prompt_group);
    st.stats.prompt_tokens += done.prompt_tokens;
    if (done.trim_to) self->send(st.cache, trim_atom::value, p.seq, *done.trim_to);
    if (done.commit) self->send(st.cache, commit_atom::value, p.seq, std::move(done.unsent), done.computed);
    if (i < res.prompt_logprobs.size()) keep_prompt_scores(info, p, res.prompt_logprobs[i]);
    if (info.req.pooling != pooling_type::none) {  // an embedding: it ends with its prompt
      if (p.sample) finish_pooled(self, p.seq, info, i < res.pooled.size() ? res.pooled[i] : std::vector<float>{});
      continue;
    }
    if (p.sample)
      emit(self, p.seq, info, emitted, done.n_total, info.req.sampling.logprobs ? &res.logprobs[i] : nullptr);
  }
  st.stats.device_ms += res.forward_ms + res.sample_ms;
  // The cost model learns the whole iteration's time, from kick() to this result: drafting
  // (a draft model's or layer skip's passes), the actors' round trips and the device step.
  // Device time alone would make drafting look free.
  const auto now = clock_type::now();
  const double step_ms = ms_between(st.kicked, now);
  if (st.spec) st.spec->report(plan.n_tokens(), step_ms);
  // The cost model that sizes steps learns the same time: what the streams wait per step.
  if (res.error.empty()) {
    st.planner->observe(plan, step_ms);
    st.stats.step_budget_tokens = plan.budget_tokens;
    st.stats.step_predicted_ms = plan.predicted_ms;
    st.stats.step_measured_ms = step_ms;
    st.stats.step_plan_ms = ms_between(st.kicked, st.dispatched);
    st.stats.step_forward_ms = res.forward_ms;
    st.stats.step_sample_ms = res.sample_ms;
    st.stats.step_transit_ms = ms_between(st.dispatched, t0) - res.forward_ms - res.sample_ms;
    st.stats.step_apply_ms = ms_between(t0, now);
  }
  st.stats.plan_ms += ms_between(t0, clock_type::now());
}

void run_planned(self_ptr self, const reserve_result& granted) {
  auto& st = self->state;
  if (!granted.disk.empty()) st.pending_disk.append(disk_transfer(granted.disk));
  st.in_flight = st.planner->finalize(granted);
  auto& plan = st.in_flight;
  if (!plan.orphaned.empty()) self->send(st.cache, release_atom::value, plan.orphaned);
  st.stats.preemptions += plan.preempted.size();
  st.stats.priority_preemptions += plan.priority_preempted;
  if (plan.seqs.empty()) {
    st.busy = false;
    if (const auto head = plan.unservable) {
      fail(self, *head,
           "the KV cache is too small for this prompt (" + std::to_string(st.planner->tokens(*head).size()) +
               " tokens); start the server with a larger --kv-cache-tokens");
    }
    if (plan.unservable || !plan.preempted.empty() || !plan.orphaned.empty()) return kick_and_flush(self);
    return flush_outbox(self);
  }
  device_step step = st.device_step_of(plan);
  step.disk = std::exchange(st.pending_disk, {});
  ++st.stats.steps;
  // Planning latency: propose, the cache manager's reserve round trip, finalize.
  st.dispatched = clock_type::now();
  st.stats.plan_ms += ms_between(st.kicked, st.dispatched);
  const auto on_result = [self](const device_step_result& res, bool worker_failed) {
    apply(self, res, worker_failed);
    self->state.busy = false;
    kick_and_flush(self);
  };
  self->request(st.device, caf::infinite, run_step_atom::value, std::move(step))
      .then([on_result](const device_step_result& res) { on_result(res, false); },
            [self, on_result](const caf::error& err) {
              device_step_result res;
              res.error = self->system().render(err);
              on_result(res, /*worker_failed=*/true);
            });
  flush_outbox(self);  // the streamers work while the device does
}

void reserve_and_run(self_ptr self) {
  auto& st = self->state;
  st.tick();
  auto req = st.planner->propose();
  std::vector<seq_id> proposed;
  for (const auto& r : req.waiting) proposed.push_back(r.seq);
  for (const auto& r : req.running) proposed.push_back(r.seq);
  self->request(st.cache, caf::infinite, reserve_atom::value, std::move(req))
      .then([self](const reserve_result& granted) { run_planned(self, granted); },
            [self, proposed](const caf::error& err) {
              // Without a reservation the step cannot run: its sequences end with the reason
              // (the cache manager is gone or failed), so no request waits forever.
              for (seq_id s : proposed) fail(self, s, "the KV cache manager failed: " + self->system().render(err));
              self->state.busy = false;
              kick_and_flush(self);
            });
}

// Drafts for the decoding sequences that may have them (engine/schedule/drafting.h), then
// the step; without drafts (drafting off, or the drafter failed) the step runs as planned.
void draft_and_run(self_ptr self) {
  auto& st = self->state;
  auto queries = st.spec->queries(*st.planner);
  if (queries.empty()) return reserve_and_run(self);
  self->request(st.drafter, caf::infinite, draft_atom::value, std::move(queries))
      .then(
          [self](const draft_batch& drafts) {
            self->state.spec->drafted(drafts, *self->state.planner);
            reserve_and_run(self);
          },
          [self](const caf::error&) { reserve_and_run(self); });
}

// The device worker died: the KV of every running sequence died with it, so they end with an
// error (the server keeps serving), the prefix index forgets what it held, and a new worker
// takes over the waiting sequences, which it has never seen.
void on_device_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (dm.source != st.device.address() || !st.respawn_device) return;
  const std::string why = self->system().render(dm.reason);
  const auto running = st.planner->running();  // a copy: finish() changes it
  for (seq_id s : running) {
    fail(self, s, "the device worker failed (" + why + ") and was restarted; this request's state was lost with it");
  }
  self->send(st.cache, reset_atom::value);
  st.pending_disk = {};  // the blocks it named died with the worker
  st.device = st.respawn_device();
  self->monitor(st.device);
  ++st.stats.device_restarts;
  st.mirror.reset();
  if (!st.busy) kick(self);
  flush_outbox(self);
}

void kick(self_ptr self) {
  auto& st = self->state;
  if (st.busy || !st.planner->has_work()) return;
  st.busy = true;
  st.kicked = clock_type::now();
  if (st.spec) return draft_and_run(self);
  reserve_and_run(self);
}

// With a disk tier: the cache manager first brings what the disk holds of the prompt into the
// pool (it asks the kv_disk actor; nothing here waits), then the sequence joins the planner
// and finds those blocks as cached ones. Aborted meanwhile: it is gone from seqs, nothing joins.
void prefetch_then_add(self_ptr self, seq_id id) {
  auto& st = self->state;
  const auto& r = st.seqs.at(id);
  auto join = [self, id] {
    auto& s = self->state;
    const auto it = s.seqs.find(id);
    if (it == s.seqs.end() || s.planner->contains(id)) return;
    s.add_to_planner(id);
    kick_and_flush(self);
  };
  self->request(st.cache, caf::infinite, prefetch_atom::value, st.salt_of(id), r.req.prompt)
      .then([join](uint32_t) { join(); }, [join](const caf::error&) { join(); });
}

// A request the scheduler cannot take ends at once.
void refuse(self_ptr self, const sequence_request& req) {
  self->send(req.streamer, tokens_atom::value, self->state.refusal(req));
}

scheduler_actor::behavior_type scheduler(self_ptr self, planner_config cfg, uint32_t block_size,
                                         uint32_t kv_capacity_tokens, cache_manager_actor cache,
                                         device_worker_actor device, speculation_setup spec,
                                         std::function<device_worker_actor()> respawn_device) {
  auto& init = self->state;
  init.block_size = block_size;
  init.capacity = kv_capacity_tokens;
  if (spec.drafter) init.spec = std::make_unique<drafting>(spec.policy, spec.drafts_first);
  init.drafter = std::move(spec.drafter);
  init.planner = std::make_unique<step_planner>(cfg);
  if (cfg.cache_salt_key != 0) init.salt_key = cfg.cache_salt_key;
  init.model_identity = cfg.model_identity;
  init.disk_tier = cfg.disk_tier;
  init.cache = std::move(cache);
  init.device = std::move(device);
  init.respawn_device = std::move(respawn_device);
  if (init.respawn_device) self->monitor(init.device);
  self->set_down_handler([self](const caf::down_msg& dm) { on_device_down(self, dm); });
  return {
      [self](enqueue_atom, sequence_request& req) {
        auto& st = self->state;
        const seq_id id = req.id;
        if (st.seqs.count(id) || req.prompt.empty() || req.prompt.size() >= st.capacity) return refuse(self, req);
        st.tick();
        if (auto no = st.slo_refusal(req)) {
          ++st.stats.slo_rejected;
          return self->send(req.streamer, tokens_atom::value, std::move(*no));
        }
        // A sequence alone may fill the pool, but not overflow it.
        if (req.max_total_tokens == 0 || req.max_total_tokens > st.capacity) req.max_total_tokens = st.capacity;
        const bool parked = req.prompt_group != 0 && st.groups.join(req.prompt_group, id, req.prompt, *st.planner);
        seq_info info;
        info.req = std::move(req);
        st.seqs.emplace(id, std::move(info));
        const auto& r = st.seqs.at(id).req;
        if (st.spec && (!r.speculative || r.sampling.logprobs)) st.spec->exclude(id);
        if (!parked && st.disk_tier && !st.scores_prompt(id)) return prefetch_then_add(self, id);
        if (!parked) st.add_to_planner(id);
        kick_and_flush(self);
      },
      [self](abort_atom, seq_id seq) {
        ++self->state.stats.aborted;
        finish(self, seq, finish_reason::abort);
        if (!self->state.busy) flush_outbox(self);
      },
      [self](force_atom, seq_id seq, std::vector<token_id>& tokens) {
        if (const auto it = self->state.seqs.find(seq); it != self->state.seqs.end()) {
          it->second.out.forced = std::move(tokens);
        }
      },
      [self](stats_atom) -> scheduler_stats {
        auto s = self->state.stats;
        s.running = static_cast<uint32_t>(self->state.planner->n_running());
        s.waiting = static_cast<uint32_t>(self->state.planner->n_waiting());
        const auto c = self->state.planner->cost_model().coefficients();
        s.step_cost.assign(c.begin(), c.end());
        s.target_step_ms = self->state.planner->config().target_step_ms;
        s.target_ttft_ms = self->state.planner->config().target_ttft_ms;
        s.prompt_share = self->state.planner->prompt_share();
        return s;
      },
      [self](spec_stats_atom) -> speculation_stats {
        return self->state.spec ? self->state.spec->stats() : speculation_stats{};
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const planner_config& cfg, uint32_t block_size,
                                uint32_t kv_capacity_tokens, cache_manager_actor cache, device_worker_actor device,
                                speculation_setup spec, std::function<device_worker_actor()> respawn_device) {
  return sys.spawn(scheduler, cfg, block_size, kv_capacity_tokens, std::move(cache), std::move(device), std::move(spec),
                   std::move(respawn_device));
}

}  // namespace tandem
