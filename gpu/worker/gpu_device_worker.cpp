#include "gpu/worker/gpu_device_worker.h"

#include <chrono>
#include <deque>
#include <random>
#include <unordered_map>

#include "actors/clock.h"
#include "actors/sampling_params_from.h"
#include "actors/step_input_from.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative.h"
#include "gpu/device.h"
#include "gpu/device_sampler.h"
#include "gpu/gpu_model.h"
#include "gpu/kernels.h"
#include "gpu/plan/step_tickets.h"

namespace tandem {
namespace {

using gpu_done_atom = caf::atom_constant<caf::atom("gpudone")>;
using gpu_worker_actor = device_worker_actor::extend<caf::reacts_to<gpu_done_atom, uint64_t>>;
// What the device sampler covers (gpu/device_sampler.h): temperature, top-k, top-p, min-p
// and penalties. Log-probabilities, logit bias and draft verification stay on the host.
bool device_samples(const sampling_options& o, const planned_seq& p) {
  return p.draft.empty() && !o.logprobs && o.logit_bias_ids.empty();
}

struct seq_state {
  explicit seq_state(const sampling_options& o)
      : s(sampling_params_from(o)), seed(o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}()) {}
  sampler s;                    // host sampling (same as the CPU worker)
  std::vector<int32_t> tokens;  // tokens[p] = token at position p (penalties)
  uint64_t seed;                // device sampling: seed and draws so far
  uint64_t draws = 0;
};

struct in_flight {
  uint64_t ticket = 0;
  device_step step;
  caf::typed_response_promise<device_step_result> rp;
  gpu::step_rows rows;
  std::vector<char> on_device;  // per sequence: sampled on the GPU
  clock_type::time_point start;
};

struct gpu_worker_state {
  std::shared_ptr<model> host_model;
  std::unique_ptr<gpu::stream> stream;
  std::unique_ptr<gpu::gpu_model> m;
  gpu::step_tickets tickets{2};
  std::deque<in_flight> running;
  std::deque<std::pair<device_step, caf::typed_response_promise<device_step_result>>> waiting;
  std::vector<gpu::pinned_buffer> ids, logits;  // per ticket slot
  gpu::device_sampler sampler{2};
  std::unordered_map<seq_id, seq_state> seqs;
  device_stats stats;
  size_t max_rows = 0;
  static inline const char* name = "tandem.device_worker.cuda";
};

struct callback_context {
  gpu_worker_actor self;
  uint64_t ticket;
};

void on_stream_done(void* user) {  // CUDA's callback thread: no CUDA calls here
  std::unique_ptr<callback_context> ctx(static_cast<callback_context*>(user));
  caf::anon_send(ctx->self, gpu_done_atom::value, ctx->ticket);
}

// The tokens the penalties count for the row after p's tokens: the generated ones (from the
// prompt's end), excluding draft tokens still to be verified; the CPU worker's history.
std::span<const int32_t> penalty_history(const seq_state& ss, const planned_seq& p, uint32_t n_prompt_of) {
  const size_t last_end = p.start_pos + p.tokens.size() - p.draft.size();
  const uint32_t n_prompt = std::min<uint32_t>(n_prompt_of, static_cast<uint32_t>(last_end));
  return std::span<const int32_t>(ss.tokens).subspan(n_prompt, last_end - n_prompt);
}

// Enqueues one step; throws on bad input (the caller replies with the error).
void enqueue(gpu_worker_actor::stateful_pointer<gpu_worker_state> self, in_flight& f) {
  auto& st = self->state;
  const auto& plan = f.step.plan;
  const auto h = st.stream->handle();
  const uint32_t slot = static_cast<uint32_t>(f.ticket % 2);
  for (seq_id s : f.step.released) st.seqs.erase(s);
  for (const auto& c : plan.copies)
    st.m->enqueue_copy_block(static_cast<int32_t>(c.src), static_cast<int32_t>(c.dst), h);

  step_input in;
  fill_step_input(plan, in);
  f.rows = st.m->enqueue_forward(in, h, slot);
  const int32_t V = static_cast<int32_t>(st.m->config().n_vocab);
  // Every sequence's tokens, in step order (the scheduler has one step in flight, so a
  // sequence's previous step has completed): the penalties' history, here and in finish.
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    auto& ss = st.seqs.try_emplace(p.seq, f.step.sampling[i]).first->second;
    ss.tokens.resize(std::min<size_t>(ss.tokens.size(), p.start_pos));
    ss.tokens.insert(ss.tokens.end(), p.tokens.begin(), p.tokens.end());
  }
  if (f.rows.n_rows == 0) return;

  // Per-row device sampling parameters (rows not sampled on the device stay greedy: ignored).
  st.sampler.begin(f.rows.n_rows);
  f.on_device.assign(plan.seqs.size(), 0);
  // Pinned room for the logits that come back (grown on demand: this slot's previous step
  // has been delivered, since tickets leave in order and at most two are in flight).
  const size_t need = static_cast<size_t>(f.rows.n_rows) * V * sizeof(float);
  if (st.logits[slot].bytes() < need) st.logits[slot] = gpu::pinned_buffer(need);
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    if (!p.sample || f.rows.n_rows_of[i] == 0) continue;
    auto& ss = st.seqs.find(p.seq)->second;
    const auto& o = f.step.sampling[i];
    if (device_samples(o, p)) {
      f.on_device[i] = 1;
      const int32_t row = f.rows.first_row[i] + f.rows.n_rows_of[i] - 1;
      st.sampler.set_row(row, gpu::sample_params{o.temperature, o.min_p, ss.seed, ss.draws++, o.top_k, o.top_p});
      st.sampler.set_penalties(row, gpu::penalty_params{o.repetition_penalty, o.frequency_penalty, o.presence_penalty},
                               penalty_history(ss, p, f.step.n_prompt[i]));
    } else {
      // Logits of this sequence's rows come back for the host sampler.
      const size_t bytes = static_cast<size_t>(f.rows.n_rows_of[i]) * V * sizeof(float);
      const size_t at = static_cast<size_t>(f.rows.first_row[i]) * V;
      gpu::copy_to_host_async(st.logits[slot].as<float>() + at, st.m->logits() + at, bytes, h);
    }
  }
  st.sampler.enqueue(st.m->logits(), V, st.m->sampled(), slot, h);
  gpu::copy_to_host_async(st.ids[slot].data(), st.m->sampled(), sizeof(int32_t) * f.rows.n_rows, h);
}

void start(gpu_worker_actor::stateful_pointer<gpu_worker_state> self, device_step step,
           caf::typed_response_promise<device_step_result> rp) {
  auto& st = self->state;
  const auto ticket = st.tickets.issue();
  if (!ticket) {
    st.waiting.emplace_back(std::move(step), std::move(rp));
    return;
  }
  in_flight f;
  f.ticket = *ticket;
  f.step = std::move(step);
  f.rp = std::move(rp);
  f.start = clock_type::now();
  try {
    enqueue(self, f);
  } catch (const std::exception& e) {
    device_step_result res;
    res.step = f.step.plan.step;
    res.emitted.assign(f.step.plan.seqs.size(), {});
    res.error = e.what();
    f.rp.deliver(std::move(res));
    // The ticket still completes through the stream, in order, with nothing to deliver.
    f.step.plan.seqs.clear();
    f.rp = {};
  }
  st.running.push_back(std::move(f));
  gpu::launch_host_callback(st.stream->handle(), on_stream_done, new callback_context{self, *ticket});
}

// Host side of a completed step: device ids, or the engine sampler over copied logits.
device_step_result finish(gpu_worker_state& st, in_flight& f) {
  device_step_result res;
  const auto& plan = f.step.plan;
  res.step = plan.step;
  res.emitted.assign(plan.seqs.size(), {});
  res.logprobs.resize(plan.seqs.size());
  const uint32_t slot = static_cast<uint32_t>(f.ticket % 2);
  const int32_t V = static_cast<int32_t>(st.m->config().n_vocab);
  const auto t1 = clock_type::now();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    auto it = st.seqs.find(p.seq);
    if (it == st.seqs.end()) it = st.seqs.try_emplace(p.seq, f.step.sampling[i]).first;
    auto& ss = it->second;  // its tokens include this step's (enqueue)
    if (!p.sample || f.rows.n_rows_of[i] == 0) continue;
    if (f.on_device[i]) {
      const int32_t row = f.rows.first_row[i] + f.rows.n_rows_of[i] - 1;
      const int32_t tok = st.ids[slot].as<int32_t>()[row];
      if (tok >= 0 && tok < V) res.emitted[i] = {tok};
      continue;
    }
    auto row = [&](int32_t j) {
      return std::span<const float>(st.logits[slot].as<float>() + static_cast<size_t>(f.rows.first_row[i] + j) * V,
                                    static_cast<size_t>(V));
    };
    const size_t last_end = p.start_pos + p.tokens.size() - p.draft.size();
    const auto history = penalty_history(ss, p, f.step.n_prompt[i]);
    if (!p.draft.empty()) {
      std::vector<std::span<const float>> rows;
      for (int32_t j = 0; j < f.rows.n_rows_of[i]; ++j) rows.push_back(row(j));
      draft_proposal proposal;
      proposal.tokens = p.draft;
      auto acc = accept_drafts(ss.s, rows, proposal, {history.begin(), history.end()});
      ss.tokens.resize(last_end + acc.n_accepted);
      res.emitted[i] = std::move(acc.tokens);
      continue;
    }
    const auto r = ss.s.sample(row(f.rows.n_rows_of[i] - 1), history);
    if (r.token >= 0) res.emitted[i] = {r.token};
    if (f.step.sampling[i].logprobs) {
      auto& lp = res.logprobs[i];
      lp.token = r.token;
      lp.logprob = r.logprob;
      for (const auto& t : r.top) {
        lp.top_ids.push_back(t.token);
        lp.top_logprobs.push_back(t.logprob);
      }
    }
  }
  const auto t2 = clock_type::now();
  res.forward_ms = ms_between(f.start, t1);  // device time, enqueue to completion
  res.sample_ms = ms_between(t1, t2);
  ++st.stats.steps;
  st.stats.tokens += plan.n_tokens();
  st.stats.busy_ms += res.forward_ms + res.sample_ms;
  return res;
}

// The device-side resources, made on the spawning thread so that a failure (no memory
// for the KV pool, a shape the kernels do not cover) reaches the caller as an exception
// instead of ending the actor silently. They then belong to the actor alone.
struct gpu_resources {
  std::unique_ptr<gpu::stream> stream;
  std::unique_ptr<gpu::gpu_model> m;
};

gpu_worker_actor::behavior_type gpu_device_worker(gpu_worker_actor::stateful_pointer<gpu_worker_state> self,
                                                  std::shared_ptr<model> m, std::shared_ptr<gpu_resources> res,
                                                  gpu_worker_options options) {
  auto& st = self->state;
  gpu::select_device(options.device);  // the current device is per host thread
  st.stream = std::move(res->stream);
  st.m = std::move(res->m);
  st.host_model = std::move(m);
  st.max_rows = options.limits.max_logit_rows;
  const size_t V = st.m->config().n_vocab;
  for (int i = 0; i < 2; ++i) {
    st.ids.emplace_back(st.max_rows * sizeof(int32_t));
    st.logits.emplace_back(V * sizeof(float));
  }
  return {
      [self](run_step_atom, device_step& step) -> caf::typed_response_promise<device_step_result> {
        auto rp = self->make_response_promise<device_step_result>();
        start(self, std::move(step), rp);
        return rp;
      },
      [self](stats_atom) -> device_stats { return self->state.stats; },
      [self](gpu_done_atom, uint64_t ticket) {
        auto& s = self->state;
        s.tickets.done(ticket);
        while (auto t = s.tickets.pop_ready()) {
          in_flight f = std::move(s.running.front());
          s.running.pop_front();
          if (f.rp.pending()) f.rp.deliver(finish(s, f));
        }
        while (!s.waiting.empty() && s.tickets.can_issue()) {
          auto [step, rp] = std::move(s.waiting.front());
          s.waiting.pop_front();
          start(self, std::move(step), std::move(rp));
        }
      },
  };
}

}  // namespace

device_worker_actor spawn_gpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m,
                                            const gpu_worker_options& options) {
  gpu::select_device(options.device);
  auto res = std::make_shared<gpu_resources>();
  res->stream = std::make_unique<gpu::stream>();
  gpu::gpu_model_options mo;
  mo.block_tokens = options.block_size;
  mo.n_blocks = static_cast<int32_t>(options.n_blocks);
  mo.gpu_memory_utilization = options.gpu_memory_utilization;
  mo.limits = options.limits;
  mo.cuda_graphs = options.cuda_graphs;
  res->m = std::make_unique<gpu::gpu_model>(m->config(), m->weights(), mo);
  return sys.spawn<caf::detached>(gpu_device_worker, std::move(m), std::move(res), options);
}

std::function<device_worker_actor(caf::actor_system&, std::shared_ptr<model>, uint32_t, uint32_t)>
gpu_device_worker_factory(gpu_worker_options options) {
  return [options](caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_blocks, uint32_t block_size) {
    gpu_worker_options o = options;
    o.n_blocks = n_blocks;
    o.block_size = block_size;
    return spawn_gpu_device_worker(sys, std::move(m), o);
  };
}

}  // namespace tandem
