#include "gpu/worker/gpu_device_worker.h"

#include <chrono>
#include <deque>
#include <optional>

#include "actors/atoms.h"
#include "actors/clock.h"
#include "actors/device/device_sequences.h"
#include "engine/model/model.h"
#include "gpu/device.h"
#include "gpu/device_sampler.h"
#include "gpu/gpu_model.h"
#include "gpu/kernels.h"

namespace tandem {
namespace {

using gpu_done_atom = caf::atom_constant<caf::atom("gpudone")>;
using gpu_worker_actor = device_worker_actor::extend<caf::reacts_to<gpu_done_atom, uint64_t>>;
// Where a planned sequence's rows are sampled.
enum class where : char {
  host,    // its logits come back for the host sampler (actors/device/device_sequences.h)
  device,  // one row sampled on the device (gpu/device_sampler.h)
  verify,  // its drafts verified on the device: K + 1 rows, verdicts and draws come back
};

// What the device sampler covers: temperature, top-k, top-p, min-p, logit bias, penalties,
// logprobs (up to kMaxTopLogprobs alternatives) and the verification of point-mass drafts
// (the host path reports no logprobs for drafted rows, so those stay with it). Grammar masks
// stay on the host.
where sampled_where(const device_sequences::sequence& sq, const device_seq& p, int32_t n_rows,
                    const gpu_worker_options& opt) {
  const auto& o = sq.options;
  if (sq.grammar) return where::host;
  if (!p.draft.empty()) {
    const bool ok = opt.device_verification && !o.logprobs && n_rows == static_cast<int32_t>(p.draft.size()) + 1 &&
                    (opt.device_logprobs || o.logit_bias_ids.empty());
    return ok ? where::verify : where::host;
  }
  if (!opt.device_logprobs) return !o.logprobs && o.logit_bias_ids.empty() ? where::device : where::host;
  return !o.logprobs || o.top_logprobs <= gpu::kMaxTopLogprobs ? where::device : where::host;
}

// The step on the stream. The scheduler sends one step at a time (it plans after each
// result), and the steps' changes to the sequences must apply in order, so a step that
// arrives while one runs waits behind it.
struct in_flight {
  uint64_t id = 0;
  device_step step;
  caf::typed_response_promise<device_step_result> rp;
  gpu::step_rows rows;
  std::vector<where> sampled;  // per sequence
  // The penalties' history of each verification row (the drafts before it included); a
  // deque, so the spans the sampler holds stay valid while it grows.
  std::deque<std::vector<token_id>> draft_histories;
  clock_type::time_point start;
};

struct gpu_worker_state {
  std::shared_ptr<model> host_model;
  std::unique_ptr<gpu::stream> stream;
  std::unique_ptr<gpu::gpu_model> m;
  std::optional<in_flight> running;
  uint64_t next_id = 0;
  std::deque<std::pair<device_step, caf::typed_response_promise<device_step_result>>> waiting;
  std::unique_ptr<gpu::pinned_buffer> ids, logits;
  gpu::device_sampler sampler{1};
  device_sequences seqs;
  step_input input;
  device_stats stats;
  size_t max_rows = 0;
  gpu_worker_options options;
  static inline const char* name = "tandem.device_worker.cuda";
};

struct callback_context {
  gpu_worker_actor self;
  uint64_t id;
};

void on_stream_done(void* user) {  // CUDA's callback thread: no CUDA calls here
  std::unique_ptr<callback_context> ctx(static_cast<callback_context*>(user));
  caf::anon_send(ctx->self, gpu_done_atom::value, ctx->id);
}

// Enqueues one step; throws on bad input (the caller replies with the error).
void enqueue(gpu_worker_state& st, in_flight& f) {
  const auto& step = f.step;
  const auto h = st.stream->handle();
  st.seqs.begin(step, st.input);
  for (const auto& c : step.copies)
    st.m->enqueue_copy_block(static_cast<int32_t>(c.src), static_cast<int32_t>(c.dst), h);
  f.rows = st.m->enqueue_forward(st.input, h, 0);
  if (f.rows.n_rows == 0) return;

  const int32_t V = static_cast<int32_t>(st.m->config().n_vocab);
  // Per-row device sampling parameters (rows not sampled on the device stay greedy: ignored).
  st.sampler.begin(f.rows.n_rows);
  f.sampled.assign(step.seqs.size(), where::host);
  f.draft_histories.clear();
  // Pinned room for the logits that come back (grown on demand: the previous step has been
  // delivered, since one step runs at a time).
  const size_t need = static_cast<size_t>(f.rows.n_rows) * V * sizeof(float);
  if (st.logits->bytes() < need) *st.logits = gpu::pinned_buffer(need);
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const auto& p = step.seqs[i];
    if (!p.sample || f.rows.n_rows_of[i] == 0) continue;
    auto& sq = st.seqs.at(p.seq);
    const auto& o = sq.options;
    f.sampled[i] = sampled_where(sq, p, f.rows.n_rows_of[i], st.options);
    const gpu::penalty_params pen{o.repetition_penalty, o.frequency_penalty, o.presence_penalty};
    if (f.sampled[i] == where::device) {
      const int32_t row = f.rows.first_row[i] + f.rows.n_rows_of[i] - 1;
      st.sampler.set_row(row, gpu::sample_params{o.temperature, o.min_p, sq.seed, sq.draws++, o.top_k, o.top_p});
      st.sampler.set_penalties(row, pen, st.seqs.history(p));
      // The options live in the sequence's copy, which stays put until the next step begins.
      st.sampler.set_logit_bias(row, o.logit_bias_ids, o.logit_bias_values);
      if (o.logprobs) st.sampler.set_logprobs(row, o.top_logprobs);
    } else if (f.sampled[i] == where::verify) {
      // Row j verifies draft j with the history the host sampler would have then (the
      // drafts before it accepted); row K is the bonus row.
      const auto hist = st.seqs.history(p);
      for (size_t j = 0; j <= p.draft.size(); ++j) {
        const int32_t row = f.rows.first_row[i] + static_cast<int32_t>(j);
        st.sampler.set_row(row, gpu::sample_params{o.temperature, o.min_p, sq.seed, sq.draws++, o.top_k, o.top_p});
        auto& seen = f.draft_histories.emplace_back(hist.begin(), hist.end());
        seen.insert(seen.end(), p.draft.begin(), p.draft.begin() + static_cast<std::ptrdiff_t>(j));
        st.sampler.set_penalties(row, pen, seen);
        st.sampler.set_logit_bias(row, o.logit_bias_ids, o.logit_bias_values);
        st.sampler.set_draft(row, j < p.draft.size() ? p.draft[j] : -1);
      }
    } else {
      // Logits of this sequence's rows come back for the host sampler.
      const size_t bytes = static_cast<size_t>(f.rows.n_rows_of[i]) * V * sizeof(float);
      const size_t at = static_cast<size_t>(f.rows.first_row[i]) * V;
      gpu::copy_to_host_async(st.logits->as<float>() + at, st.m->logits() + at, bytes, h);
    }
  }
  st.sampler.enqueue(st.m->logits(), V, st.m->sampled(), 0, h);
  gpu::copy_to_host_async(st.ids->data(), st.m->sampled(), sizeof(int32_t) * f.rows.n_rows, h);
}

void start(gpu_worker_actor::stateful_pointer<gpu_worker_state> self, device_step step,
           caf::typed_response_promise<device_step_result> rp) {
  auto& st = self->state;
  if (st.running) {
    st.waiting.emplace_back(std::move(step), std::move(rp));
    return;
  }
  auto& f = st.running.emplace();
  f.id = st.next_id++;
  f.step = std::move(step);
  f.rp = std::move(rp);
  f.start = clock_type::now();
  try {
    enqueue(st, f);
  } catch (const std::exception& e) {
    device_step_result res;
    res.step = f.step.step;
    res.emitted.assign(f.step.seqs.size(), {});
    res.error = e.what();
    f.rp.deliver(std::move(res));
    // The callback still completes through the stream, in order, with nothing to deliver.
    f.step.seqs.clear();
    f.rp = {};
  }
  gpu::launch_host_callback(st.stream->handle(), on_stream_done, new callback_context{self, f.id});
}

// Host side of a completed step: device ids, or the shared host sampler over copied logits.
device_step_result finish(gpu_worker_state& st, in_flight& f) {
  device_step_result res;
  const auto& step = f.step;
  res.step = step.step;
  res.emitted.assign(step.seqs.size(), {});
  res.logprobs.resize(step.seqs.size());
  const int32_t V = static_cast<int32_t>(st.m->config().n_vocab);
  const auto t1 = clock_type::now();
  std::vector<std::span<const float>> rows;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const auto& p = step.seqs[i];
    if (!p.sample || f.rows.n_rows_of[i] == 0) continue;
    if (f.sampled[i] == where::verify) {
      // As engine/sampling/speculative.h's accept_drafts: the accepted drafts, then the draw
      // of the first rejecting row or of the bonus row; nothing usable ends the sequence.
      auto& out = res.emitted[i];
      const int32_t* ids = st.ids->as<int32_t>();
      for (size_t j = 0; j <= p.draft.size(); ++j) {
        const int32_t row = f.rows.first_row[i] + static_cast<int32_t>(j);
        const gpu::draft_verdict& v = st.sampler.verdict(0, row);
        if (v.verdict < 0) break;
        if (j < p.draft.size() && v.verdict == 1) {
          out.push_back(p.draft[j]);
          continue;
        }
        if (ids[row] >= 0 && ids[row] < V) out.push_back(ids[row]);
        break;
      }
      st.seqs.record(p, out);
      continue;
    }
    if (f.sampled[i] == where::device) {
      const int32_t row = f.rows.first_row[i] + f.rows.n_rows_of[i] - 1;
      const int32_t tok = st.ids->as<int32_t>()[row];
      if (tok >= 0 && tok < V) res.emitted[i] = {tok};
      st.seqs.record(p, res.emitted[i]);
      if (st.seqs.at(p.seq).options.logprobs) {  // as the host sampler reports them
        auto& lp = res.logprobs[i];
        lp.token = tok >= 0 && tok < V ? tok : -1;
        if (lp.token >= 0) {
          const gpu::row_logprobs& d = st.sampler.logprobs(0, row);
          lp.logprob = d.logprob;
          lp.top_ids.assign(d.top_ids, d.top_ids + d.n_top);
          lp.top_logprobs.assign(d.top_logprobs, d.top_logprobs + d.n_top);
        }
      }
      continue;
    }
    rows.clear();
    for (int32_t j = 0; j < f.rows.n_rows_of[i]; ++j) {
      rows.emplace_back(st.logits->as<float>() + static_cast<size_t>(f.rows.first_row[i] + j) * V,
                        static_cast<size_t>(V));
    }
    res.emitted[i] = st.seqs.sample(p, rows, res.logprobs[i]);
  }
  const auto t2 = clock_type::now();
  res.forward_ms = ms_between(f.start, t1);  // device time, enqueue to completion
  res.sample_ms = ms_between(t1, t2);
  ++st.stats.steps;
  st.stats.tokens += step.n_tokens();
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
  st.options = options;
  const size_t V = st.m->config().n_vocab;
  st.ids = std::make_unique<gpu::pinned_buffer>(st.max_rows * sizeof(int32_t));
  st.logits = std::make_unique<gpu::pinned_buffer>(V * sizeof(float));
  return {
      [self](run_step_atom, device_step& step) -> caf::typed_response_promise<device_step_result> {
        auto rp = self->make_response_promise<device_step_result>();
        start(self, std::move(step), rp);
        return rp;
      },
      [self](stats_atom) -> device_stats { return self->state.stats; },
      [self](gpu_done_atom, uint64_t id) {
        auto& s = self->state;
        if (!s.running || s.running->id != id) return;
        in_flight f = std::move(*s.running);
        s.running.reset();
        if (f.rp.pending()) f.rp.deliver(finish(s, f));
        if (!s.waiting.empty()) {
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
  mo.bf16_shadow = options.bf16_shadow;
  mo.kv_dtype = options.kv_dtype;
  mo.staging_slots = 1;  // one step on the stream at a time
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
