#include "actors/scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <unordered_map>

#include "actors/clock.h"
#include "actors/spawn.h"
#include "engine/kv/block_pool.h"

namespace tandem {
namespace {

struct seq_info {
  sequence_request req;
  uint32_t n_generated = 0;
  bool on_device = false;        // the device holds its copy (device_seq_start was sent)
  bool on_device_table = false;  // and its block table (the first table goes whole)
  uint32_t n_device = 0;         // tokens the device holds: a token crosses once
  clock_type::time_point enqueued = clock_type::now();
  bool started = false;         // the first batch (with queue time and cache hit) was sent
  uint32_t drafter_known = 0;   // tokens of this sequence the drafter has seen
  uint32_t draft_evidence = 0;  // of the draft in flight (speculation_outcome::evidence)
  double queue_ms = 0;
  uint32_t cached_tokens = 0;
  bool parked = false;           // waits for its prompt group's leader to compute the shared prompt
  std::vector<token_id> forced;  // to append after its next token (force_atom)
};

// The choices of one request (generate_request::prompt_group): the first to arrive leads
// and computes the prompt; the others wait parked, and once the leader's prompt is computed
// they fork its blocks and compute only the prompt's last token each.
//
//   enqueue(leader) -> planner      enqueue(other, leader still prefilling) -> parked
//   leader's prompt computed: parked -> fork(leader, other) -> running
//   leader gone first: parked -> planner (the prefix cache holds what it committed)
struct prompt_group {
  seq_id leader = 0;
  std::vector<seq_id> parked;
};

struct scheduler_state {
  std::unique_ptr<step_planner> planner;
  cache_manager_actor cache;
  device_worker_actor device;
  drafter_actor drafter;  // null: no speculative decoding
  verifier_actor verifier;
  bool drafts_first = false;  // see speculation_actors
  uint32_t k_max = 0;
  std::unordered_map<seq_id, seq_info> seqs;
  std::unordered_map<uint64_t, prompt_group> groups;
  uint64_t salt_key = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}();
  std::function<device_worker_actor()> respawn_device;  // empty: the device is not supervised
  uint64_t device_restarts = 0;
  std::vector<seq_id> released;  // ended since the last step: the device drops their state
  // Token batches for the streamers, sent once the next step is on its way to the device:
  // the streamers' work then overlaps the device's instead of delaying the plan (they share
  // CAF's threads with the cache manager and this actor). Kept in order per streamer.
  std::vector<std::pair<streamer_actor, token_batch>> outbox;
  step_plan_core in_flight;  // the plan the device is running
  bool busy = false;
  clock_type::time_point kicked;  // when planning of the current step began
  uint32_t block_size = 16;
  uint32_t capacity = 0;  // tokens the KV pool holds
  scheduler_stats stats;
  static inline const char* name = "tandem.scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void kick(self_ptr self);

void deliver(self_ptr self, const streamer_actor& to, token_batch batch) {
  self->state.outbox.emplace_back(to, std::move(batch));
}

void flush_outbox(self_ptr self) {
  for (auto& [to, batch] : self->state.outbox) self->send(to, tokens_atom::value, std::move(batch));
  self->state.outbox.clear();
}

// A group's salt: a keyed hash, with a key chosen at random when the scheduler starts, so no
// client can compute another group's block hashes (vLLM's client-set cache_salt can be).
uint64_t cache_salt(const scheduler_state& st, const std::string& group) {
  return block_pool::salt_for_group(group, st.salt_key);
}

void add_to_planner(scheduler_state& st, seq_id id) {
  const auto& r = st.seqs.at(id).req;
  st.planner->add(id, r.tenant, r.weight, r.prompt, cache_salt(st, r.cache_group), r.kv_cache_share);
}

// A sequence of a prompt group ends: a parked one leaves the queue; a leader that goes
// first lets its parked choices run on their own.
void leave_group(scheduler_state& st, seq_id seq, const seq_info& info) {
  const auto g = st.groups.find(info.req.prompt_group);
  if (g == st.groups.end()) return;
  auto& parked = g->second.parked;
  if (info.parked) {
    parked.erase(std::remove(parked.begin(), parked.end(), seq), parked.end());
    return;
  }
  if (g->second.leader != seq) return;
  for (seq_id c : parked) {
    st.seqs.at(c).parked = false;
    add_to_planner(st, c);
  }
  st.groups.erase(g);
}

// The leader's prompt is computed: its parked choices fork its blocks (while running slots
// last; the rest queue, and the prefix cache serves them what the leader committed).
void fork_parked(self_ptr self, seq_id leader, uint64_t group) {
  auto& st = self->state;
  const auto g = st.groups.find(group);
  if (g == st.groups.end() || g->second.leader != leader || g->second.parked.empty()) return;
  if (st.planner->n_computed(leader) < st.planner->n_prompt(leader)) return;
  for (seq_id c : std::exchange(g->second.parked, {})) {
    st.seqs.at(c).parked = false;
    if (st.planner->n_running() < st.planner->config().max_num_seqs) {
      self->send(st.cache, fork_atom::value, leader, c, st.planner->n_prompt(leader));
      st.planner->add_forked(c, leader);
    } else {
      add_to_planner(st, c);
    }
  }
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
  if (it->second.req.prompt_group != 0) leave_group(st, seq, it->second);
  self->send(st.cache, release_atom::value, std::vector<seq_id>{seq});
  st.released.push_back(seq);
  if (st.drafter) self->send(st.drafter, forget_atom::value, std::vector<seq_id>{seq});
  if (st.verifier) self->send(st.verifier, forget_atom::value, std::vector<uint64_t>{seq});
  st.seqs.erase(it);
}

// worker_failed: the step never came back (the device worker died); otherwise res.error is
// the worker's own report of a failed step.
void apply(self_ptr self, const device_step_result& res, bool worker_failed = false) {
  auto& st = self->state;
  const auto t0 = clock_type::now();
  const auto& plan = st.in_flight;
  std::vector<speculation_outcome> outcomes;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    const auto it = st.seqs.find(p.seq);
    if (it == st.seqs.end() || !st.planner->contains(p.seq)) continue;  // aborted meanwhile
    auto& info = it->second;
    if (!res.error.empty()) {
      token_batch b;
      b.error = worker_failed ? "the device worker failed (" + res.error + ") and was restarted"
                              : "the forward pass failed: " + res.error;
      finish(self, p.seq, finish_reason::error, b);
      continue;
    }
    const auto& emitted = res.emitted[i];
    const uint32_t total_before = static_cast<uint32_t>(st.planner->tokens(p.seq).size());
    st.planner->complete(p, emitted);
    info.n_device += static_cast<uint32_t>(emitted.size());  // the device appended them too
    if (info.req.prompt_group != 0) fork_parked(self, p.seq, info.req.prompt_group);
    const uint32_t computed = st.planner->n_computed(p.seq);
    const uint32_t n_prompt = st.planner->n_prompt(p.seq);
    if (p.start_pos < n_prompt) st.stats.prompt_tokens += std::min(computed, n_prompt) - p.start_pos;
    if (!p.draft.empty()) {
      // Blocks that only held rejected drafts go back; the prefix index never saw them.
      self->send(st.cache, trim_atom::value, p.seq, static_cast<uint32_t>(st.planner->tokens(p.seq).size()));
      outcomes.push_back({p.seq, static_cast<uint32_t>(p.draft.size()),
                          emitted.empty() ? 0u : static_cast<uint32_t>(emitted.size()) - 1, info.draft_evidence});
    }
    // Full blocks completed in this step enter the prefix index.
    if (computed / st.block_size != p.start_pos / st.block_size) {
      const auto unsent = st.planner->take_unsent(p.seq);
      self->send(st.cache, commit_atom::value, p.seq, std::vector<token_id>(unsent.begin(), unsent.end()), computed);
    }
    if (!p.sample) continue;

    token_batch batch;
    batch.seq = p.seq;
    if (!info.started) {
      info.started = true;
      batch.cached_tokens = info.cached_tokens;
      batch.queue_ms = info.queue_ms;
    }
    if (emitted.empty()) {  // every token was masked out: nothing can follow
      finish(self, p.seq, finish_reason::stop, std::move(batch));
      continue;
    }
    std::optional<finish_reason> reason;
    for (size_t j = 0; j < emitted.size() && !reason; ++j) {
      const int32_t tok = emitted[j];
      ++info.n_generated;
      ++st.stats.generated_tokens;
      const auto& stops = info.req.stop_token_ids;
      if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
        reason = finish_reason::stop;
        break;
      }
      batch.tokens.push_back(tok);
      if (info.req.sampling.logprobs) batch.logprobs.push_back(res.logprobs[i]);
      const uint32_t total = total_before + static_cast<uint32_t>(j) + 1;
      if (info.n_generated >= info.req.max_new_tokens ||
          (info.req.max_total_tokens > 0 && total >= info.req.max_total_tokens)) {
        reason = finish_reason::length;
      }
    }
    if (!reason && !info.forced.empty()) {
      // A thinking budget ran out: its end tag follows this token, as if emitted, when the
      // limits leave room for it and one more token.
      auto forced = std::exchange(info.forced, {});
      const auto n = static_cast<uint32_t>(forced.size());
      const auto total = static_cast<uint32_t>(st.planner->tokens(p.seq).size());
      if (info.n_generated + n < info.req.max_new_tokens &&
          (info.req.max_total_tokens == 0 || total + n < info.req.max_total_tokens)) {
        st.planner->append_tokens(p.seq, forced);
        info.n_generated += n;
        st.stats.generated_tokens += n;
        for (token_id t : forced) {
          batch.tokens.push_back(t);
          if (info.req.sampling.logprobs) batch.logprobs.push_back({t, 0.0f, {}, {}});
        }
      }
    }
    if (reason) {
      finish(self, p.seq, *reason, std::move(batch));
    } else {
      deliver(self, info.req.streamer, std::move(batch));
    }
  }
  st.stats.device_ms += res.forward_ms + res.sample_ms;
  // The cost model learns the whole iteration's time, from kick() to this result: drafting
  // (a draft model's or layer skip's passes), the actors' round trips and the device step.
  // Device time alone would make drafting look free.
  if (st.verifier) {
    self->send(st.verifier, report_atom::value, std::move(outcomes), plan.n_tokens(),
               ms_between(st.kicked, clock_type::now()));
  }
  st.stats.plan_ms += ms_between(t0, clock_type::now());
}

// The plan as a change to what the device holds: options once, tokens once, tables as the
// grants changed them.
device_step device_step_of(scheduler_state& st, step_plan_core& plan) {
  device_step step;
  step.step = plan.step;
  step.copies = plan.copies;
  step.preempted = plan.preempted;
  step.released = std::exchange(st.released, {});
  step.seqs.reserve(plan.seqs.size());
  for (auto& p : plan.seqs) {
    auto& info = st.seqs.at(p.seq);
    if (!info.started && p.start_pos == p.n_cached && p.n_cached > 0) info.cached_tokens = p.n_cached;
    if (!info.started && info.queue_ms == 0) info.queue_ms = ms_between(info.enqueued, clock_type::now());
    if (!info.on_device) {
      step.started.push_back({p.seq, info.req.sampling, st.planner->n_prompt(p.seq), info.req.grammar});
      info.on_device = true;
    }
    device_seq d;
    d.seq = p.seq;
    d.start_pos = p.start_pos;
    d.n_new = p.n_new;
    d.draft = p.draft;
    d.sample = p.sample;
    if (info.on_device_table) {
      d.delta = std::move(p.delta);  // applied to the planner's table already
    } else {
      // A forked sequence's table began as its parent's: the device gets the whole tables.
      d.delta = table_delta::whole(st.planner->table(p.seq), st.planner->local_table(p.seq), p.delta.local_first);
      info.on_device_table = true;
    }
    const uint32_t end = p.start_pos + p.n_new;
    if (end > info.n_device) {
      const auto& toks = st.planner->tokens(p.seq);
      d.new_tokens.assign(toks.begin() + info.n_device, toks.begin() + end);
      info.n_device = end;
    }
    step.seqs.push_back(std::move(d));
  }
  return step;
}

// Continues the loop after a result or an arrival; batches waiting in the outbox go out now
// unless a plan is being made (run_planned sends them right after the step).
void kick_and_flush(self_ptr self) {
  kick(self);
  if (!self->state.busy) flush_outbox(self);
}

void run_planned(self_ptr self, const reserve_result& granted, std::vector<seq_id> proposed_waiting) {
  auto& st = self->state;
  st.in_flight = st.planner->finalize(granted);
  auto& plan = st.in_flight;
  if (!plan.orphaned.empty()) self->send(st.cache, release_atom::value, plan.orphaned);
  st.stats.preemptions += plan.preempted.size();
  if (plan.seqs.empty()) {
    st.busy = false;
    if (!plan.preempted.empty() || !plan.orphaned.empty()) return kick_and_flush(self);
    // Nothing fits and nothing runs: the head of the queue can never be served by this pool.
    if (st.planner->n_running() == 0 && !proposed_waiting.empty() && st.planner->contains(proposed_waiting.front())) {
      token_batch b;
      b.error = "the KV cache is too small for this prompt (" +
                std::to_string(st.planner->tokens(proposed_waiting.front()).size()) +
                " tokens); start the server "
                "with a larger --kv-cache-tokens";
      finish(self, proposed_waiting.front(), finish_reason::error, b);
      return kick_and_flush(self);
    }
    return flush_outbox(self);
  }
  device_step step = device_step_of(st, plan);
  ++st.stats.steps;
  // Planning latency: propose, the cache manager's reserve round trip, finalize.
  st.stats.plan_ms += ms_between(st.kicked, clock_type::now());
  self->request(st.device, caf::infinite, run_step_atom::value, std::move(step))
      .then(
          [self](const device_step_result& res) {
            apply(self, res);
            self->state.busy = false;
            kick_and_flush(self);
          },
          [self](const caf::error& err) {
            device_step_result res;
            res.error = self->system().render(err);
            apply(self, res, /*worker_failed=*/true);
            self->state.busy = false;
            kick_and_flush(self);
          });
  flush_outbox(self);  // the streamers work while the device does
}

void reserve_and_run(self_ptr self) {
  auto& st = self->state;
  auto req = st.planner->propose();
  std::vector<seq_id> proposed_waiting;
  for (const auto& w : req.waiting) proposed_waiting.push_back(w.seq);
  std::vector<seq_id> proposed = proposed_waiting;
  for (const auto& r : req.running) proposed.push_back(r.seq);
  self->request(st.cache, caf::infinite, reserve_atom::value, std::move(req))
      .then([self, proposed_waiting](const reserve_result& granted) { run_planned(self, granted, proposed_waiting); },
            [self, proposed](const caf::error& err) {
              // Without a reservation the step cannot run: its sequences end with the reason
              // (the cache manager is gone or failed), so no request waits forever.
              for (seq_id s : proposed) {
                token_batch b;
                b.error = "the KV cache manager failed: " + self->system().render(err);
                finish(self, s, finish_reason::error, std::move(b));
              }
              self->state.busy = false;
              kick_and_flush(self);
            });
}

// The sequences that may draft this step, and the step's tokens without drafts.
std::vector<uint64_t> draft_candidates(self_ptr self, uint32_t& base_tokens) {
  auto& sched = self->state;
  std::vector<uint64_t> candidates;
  for (seq_id s : sched.planner->decoding()) {
    const auto& req = sched.seqs.at(s).req;
    if (req.speculative && !req.sampling.logprobs) candidates.push_back(s);
  }
  base_tokens = candidates.empty() ? 0 : sched.planner->proposed_tokens();
  return candidates;
}

// One query per candidate (k[i] drafts wanted), carrying the tokens the drafter has not seen.
std::vector<draft_query> draft_queries(self_ptr self, const std::vector<uint64_t>& candidates,
                                       const std::vector<uint32_t>& k, std::vector<seq_id>& asked) {
  auto& st = self->state;
  std::vector<draft_query> queries;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto it = st.seqs.find(candidates[i]);
    if (it == st.seqs.end() || !st.planner->contains(candidates[i])) continue;
    const auto& toks = st.planner->tokens(candidates[i]);
    draft_query q;
    q.seq = candidates[i];
    q.new_tokens.assign(toks.begin() + it->second.drafter_known, toks.end());
    q.k = k[i];
    it->second.drafter_known = static_cast<uint32_t>(toks.size());
    queries.push_back(std::move(q));
    asked.push_back(candidates[i]);
  }
  return queries;
}

// The first keep[i] tokens of drafts[i] ride along in the step.
void set_drafts(self_ptr self, const std::vector<seq_id>& asked, const draft_batch& drafts,
                const std::vector<uint32_t>* keep) {
  auto& st = self->state;
  for (size_t i = 0; i < asked.size() && i < drafts.size() && (!keep || i < keep->size()); ++i) {
    const uint32_t n = keep ? std::min<uint32_t>((*keep)[i], static_cast<uint32_t>(drafts[i].tokens.size()))
                            : static_cast<uint32_t>(drafts[i].tokens.size());
    if (n == 0 || !st.planner->contains(asked[i])) continue;
    st.planner->set_draft(asked[i], {drafts[i].tokens.begin(), drafts[i].tokens.begin() + n});
    st.seqs.at(asked[i]).draft_evidence = drafts[i].evidence;
  }
}

// A model drafter: the verifier says how many drafts each decoding sequence gets (none when
// the cost model says it does not pay), the drafter runs them, and they ride along.
void plan_then_draft(self_ptr self) {
  uint32_t base_tokens = 0;
  auto candidates = draft_candidates(self, base_tokens);
  if (candidates.empty()) return reserve_and_run(self);
  self->request(self->state.verifier, caf::infinite, plan_k_atom::value, candidates, base_tokens)
      .then(
          [self, candidates](const std::vector<uint32_t>& ks) {
            // Drafting is off for this step: skip the drafter's round trip altogether (it
            // catches up on the tokens it missed at the next query).
            if (std::all_of(ks.begin(), ks.end(), [](uint32_t k) { return k == 0; })) return reserve_and_run(self);
            std::vector<seq_id> asked;
            auto queries = draft_queries(self, candidates, ks, asked);
            self->request(self->state.drafter, caf::infinite, draft_atom::value, std::move(queries))
                .then(
                    [self, asked](const draft_batch& drafts) {
                      set_drafts(self, asked, drafts, nullptr);
                      reserve_and_run(self);
                    },
                    [self](const caf::error&) { reserve_and_run(self); });
          },
          [self](const caf::error&) { reserve_and_run(self); });
}

// The n-gram drafter: it proposes up to k_max tokens per sequence with their evidence, and
// the verifier keeps those worth verifying (engine/speculation/speculation_policy.h, trim).
void draft_then_trim(self_ptr self) {
  uint32_t base_tokens = 0;
  auto candidates = draft_candidates(self, base_tokens);
  if (candidates.empty()) return reserve_and_run(self);
  std::vector<seq_id> asked;
  auto queries = draft_queries(self, candidates, std::vector<uint32_t>(candidates.size(), self->state.k_max), asked);
  const auto n_decoding = static_cast<uint32_t>(candidates.size());
  self->request(self->state.drafter, caf::infinite, draft_atom::value, std::move(queries))
      .then(
          [self, asked, n_decoding, base_tokens](const draft_batch& drafts) {
            // No lookup found anything: skip the verifier's round trip.
            if (std::all_of(drafts.begin(), drafts.end(), [](const draft& d) { return d.tokens.empty(); })) {
              return reserve_and_run(self);
            }
            std::vector<draft_offer> offers;  // parallel to asked (an empty draft offers 0 tokens)
            for (size_t i = 0; i < asked.size() && i < drafts.size(); ++i) {
              offers.push_back({asked[i], static_cast<uint32_t>(drafts[i].tokens.size()), drafts[i].evidence});
            }
            self->request(self->state.verifier, caf::infinite, trim_drafts_atom::value, std::move(offers), n_decoding,
                          base_tokens)
                .then(
                    [self, asked, drafts](const std::vector<uint32_t>& keep) {
                      set_drafts(self, asked, drafts, &keep);
                      reserve_and_run(self);
                    },
                    [self](const caf::error&) { reserve_and_run(self); });
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
    token_batch b;
    b.error = "the device worker failed (" + why + ") and was restarted; this request's state was lost with it";
    finish(self, s, finish_reason::error, std::move(b));
  }
  self->send(st.cache, reset_atom::value);
  st.device = st.respawn_device();
  self->monitor(st.device);
  ++st.device_restarts;
  st.released.clear();  // the new worker holds nothing
  for (auto& [id, info] : st.seqs) {
    info.on_device = info.on_device_table = false;
    info.n_device = 0;
  }
  if (!st.busy) kick(self);
  flush_outbox(self);
}

void kick(self_ptr self) {
  auto& st = self->state;
  if (st.busy || !st.planner->has_work()) return;
  st.busy = true;
  st.kicked = clock_type::now();
  if (st.drafter && st.verifier) return st.drafts_first ? draft_then_trim(self) : plan_then_draft(self);
  reserve_and_run(self);
}

scheduler_actor::behavior_type scheduler(self_ptr self, planner_config cfg, uint32_t block_size,
                                         uint32_t kv_capacity_tokens, cache_manager_actor cache,
                                         device_worker_actor device, speculation_actors spec,
                                         std::function<device_worker_actor()> respawn_device) {
  auto& init = self->state;
  init.block_size = block_size;
  init.capacity = kv_capacity_tokens;
  init.drafter = std::move(spec.drafter);
  init.verifier = std::move(spec.verifier);
  init.drafts_first = spec.drafts_first;
  init.k_max = spec.k_max;
  init.planner = std::make_unique<step_planner>(cfg);
  if (cfg.cache_salt_key != 0) init.salt_key = cfg.cache_salt_key;
  init.cache = std::move(cache);
  init.device = std::move(device);
  init.respawn_device = std::move(respawn_device);
  if (init.respawn_device) self->monitor(init.device);
  self->set_down_handler([self](const caf::down_msg& dm) { on_device_down(self, dm); });
  return {
      [self](enqueue_atom, sequence_request& req) {
        auto& st = self->state;
        const seq_id id = req.id;
        if (st.seqs.count(id) || req.prompt.empty() || req.prompt.size() >= st.capacity) {
          token_batch b;
          b.seq = id;
          b.finished = true;
          b.reason = finish_reason::error;
          if (req.prompt.size() >= st.capacity) {
            b.error = "the prompt has " + std::to_string(req.prompt.size()) + " tokens but the KV cache holds " +
                      std::to_string(st.capacity) + "; start the server with a larger --kv-cache-tokens";
          }
          self->send(req.streamer, tokens_atom::value, std::move(b));
          return;
        }
        // A sequence alone may fill the pool, but not overflow it.
        if (req.max_total_tokens == 0 || req.max_total_tokens > st.capacity) req.max_total_tokens = st.capacity;
        seq_info info;
        if (req.prompt_group != 0) {
          auto [g, fresh] = st.groups.try_emplace(req.prompt_group);
          const seq_id leader = g->second.leader;
          if (fresh) {
            g->second.leader = id;
          } else if (st.planner->contains(leader) && st.planner->n_computed(leader) < st.planner->n_prompt(leader) &&
                     st.seqs.at(leader).req.prompt == req.prompt) {
            info.parked = true;
            g->second.parked.push_back(id);
          }
        }
        info.req = std::move(req);
        const bool parked = info.parked;
        st.seqs.emplace(id, std::move(info));
        if (!parked) add_to_planner(st, id);
        kick_and_flush(self);
      },
      [self](abort_atom, seq_id seq) {
        ++self->state.stats.aborted;
        finish(self, seq, finish_reason::abort);
        if (!self->state.busy) flush_outbox(self);
      },
      [self](force_atom, seq_id seq, std::vector<token_id>& tokens) {
        if (const auto it = self->state.seqs.find(seq); it != self->state.seqs.end()) {
          it->second.forced = std::move(tokens);
        }
      },
      [self](stats_atom) -> scheduler_stats {
        auto s = self->state.stats;
        s.device_restarts = self->state.device_restarts;
        s.running = static_cast<uint32_t>(self->state.planner->n_running());
        s.waiting = static_cast<uint32_t>(self->state.planner->n_waiting());
        return s;
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const planner_config& cfg, uint32_t block_size,
                                uint32_t kv_capacity_tokens, cache_manager_actor cache, device_worker_actor device,
                                speculation_actors spec, std::function<device_worker_actor()> respawn_device) {
  return sys.spawn(scheduler, cfg, block_size, kv_capacity_tokens, std::move(cache), std::move(device), std::move(spec),
                   std::move(respawn_device));
}

}  // namespace tandem
