#include "actors/device_worker.h"

#include <pthread.h>

#include <cstring>
#include <unordered_map>

#include "actors/clock.h"
#include "actors/sampling_params_from.h"
#include "actors/step_input_from.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative.h"

namespace tandem {
namespace {

// Per-sequence state kept where the logits are: the sampler (its random stream) and the
// tokens seen at each position, for the penalties.
struct seq_sampling {
  explicit seq_sampling(const sampling_options& o) : s(sampling_params_from(o)) {}
  sampler s;
  std::vector<int32_t> tokens;  // tokens[p] = token at position p
};

struct device_worker_state {
  std::shared_ptr<model> m;
  std::unique_ptr<kv_pool> kv;
  std::unordered_map<seq_id, seq_sampling> seqs;
  step_input input;
  step_output output;
  device_stats stats;
  static inline const char* name = "tandem.device_worker.cpu";
};

void copy_block(kv_pool& kv, block_id src, block_id dst) {
  const size_t n = static_cast<size_t>(kv.block_tokens()) * kv.head_dim() * sizeof(kernels::f16_bits);
  for (uint32_t l = 0; l < kv.n_layer(); ++l) {
    for (uint32_t h = 0; h < kv.n_head_kv(); ++h) {
      std::memcpy(kv.k(l, static_cast<int32_t>(dst), h), kv.k(l, static_cast<int32_t>(src), h), n);
      std::memcpy(kv.v(l, static_cast<int32_t>(dst), h), kv.v(l, static_cast<int32_t>(src), h), n);
    }
  }
}

device_step_result run_step(device_worker_state& st, const device_step& step) {
  // The worker is detached: this is its own thread, which also leads the compute pool.
  // Named so profilers and the serving benchmark can tell model compute from the rest.
  thread_local const bool named = pthread_setname_np(pthread_self(), "tandem-device") == 0;
  (void)named;
  device_step_result res;
  res.step = step.plan.step;
  const auto& plan = step.plan;
  res.emitted.assign(plan.seqs.size(), {});
  res.logprobs.resize(plan.seqs.size());
  for (seq_id s : step.released) st.seqs.erase(s);
  for (const auto& c : plan.copies) copy_block(*st.kv, c.src, c.dst);

  auto& in = st.input;
  fill_step_input(plan, in);
  const auto t0 = clock_type::now();
  try {
    st.m->forward(in, *st.kv, st.output);
  } catch (const std::exception& e) {
    res.error = e.what();
    return res;
  }
  res.forward_ms = ms_since(t0);

  const auto t1 = clock_type::now();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    auto it = st.seqs.find(p.seq);
    if (it == st.seqs.end()) it = st.seqs.try_emplace(p.seq, step.sampling[i]).first;
    auto& ss = it->second;
    // Positions before start_pos are known; anything past them was rolled back or recomputed.
    ss.tokens.resize(std::min<size_t>(ss.tokens.size(), p.start_pos));
    ss.tokens.insert(ss.tokens.end(), p.tokens.begin(), p.tokens.end());
    if (!p.sample) continue;
    // Penalties look at the output so far, up to and including the sequence's last token.
    const size_t last_end = p.start_pos + p.tokens.size() - p.draft.size();
    const uint32_t n_prompt = std::min<uint32_t>(step.n_prompt[i], static_cast<uint32_t>(last_end));
    const auto history = std::span<const int32_t>(ss.tokens).subspan(n_prompt, last_end - n_prompt);
    if (!p.draft.empty()) {
      std::vector<std::span<const float>> rows;
      for (int32_t j = 0; j < st.output.n_rows[i]; ++j) rows.push_back(st.output.row(i, j));
      draft_proposal proposal;
      proposal.tokens = p.draft;  // n-gram drafts: point masses
      auto acc = accept_drafts(ss.s, rows, proposal, {history.begin(), history.end()});
      ss.tokens.resize(last_end + acc.n_accepted);  // rejected positions are not part of the sequence
      res.emitted[i] = std::move(acc.tokens);
      continue;
    }
    const auto r = ss.s.sample(st.output.last(i), history);
    if (r.token >= 0) res.emitted[i] = {r.token};
    if (step.sampling[i].logprobs) {
      auto& lp = res.logprobs[i];
      lp.token = r.token;
      lp.logprob = r.logprob;
      for (const auto& t : r.top) {
        lp.top_ids.push_back(t.token);
        lp.top_logprobs.push_back(t.logprob);
      }
    }
  }
  res.sample_ms = ms_since(t1);
  ++st.stats.steps;
  st.stats.tokens += plan.n_tokens();
  st.stats.busy_ms += res.forward_ms + res.sample_ms;
  return res;
}

device_worker_actor::behavior_type cpu_device_worker(device_worker_actor::stateful_pointer<device_worker_state> self,
                                                     std::shared_ptr<model> m, uint32_t n_blocks, uint32_t block_size) {
  kv_pool_options opts;
  opts.block_tokens = static_cast<int>(block_size);
  opts.capacity_tokens = static_cast<int64_t>(n_blocks) * block_size;
  self->state.kv = std::make_unique<kv_pool>(m->config(), opts);
  self->state.m = std::move(m);
  return {
      [self](run_step_atom, const device_step& step) -> device_step_result { return run_step(self->state, step); },
      [self](stats_atom) -> device_stats { return self->state.stats; },
  };
}

}  // namespace

device_worker_actor spawn_cpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_blocks,
                                            uint32_t block_size) {
  return sys.spawn<caf::detached>(cpu_device_worker, std::move(m), n_blocks, block_size);
}

}  // namespace tandem
