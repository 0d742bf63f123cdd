#include "actors/device/device_worker.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include <pthread.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/clock.h"
#include "actors/device/device_sequences.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/platform/fault_injection.h"

namespace tandem {
namespace {

struct device_worker_state {
  std::shared_ptr<model> m;
  std::unique_ptr<kv_pool> kv;
  std::unique_ptr<device_sequences> seqs;
  step_input input;
  step_output output;
  std::optional<rank_head> head;  // a reranker's classification head (rank pooling)
  kv_disk_actor spill_to;         // the disk tier (null: none)
  device_stats stats;
  static inline const char* name = "tandem.device_worker.cpu";
};

// The layers of the copy's pool (every layer without a local pool).
void copy_block(kv_pool& kv, const block_copy& c) {
  const size_t n = kv.head_block_bytes();  // whatever the cache's element type
  const block_id src = c.src, dst = c.dst;
  for (uint32_t l = 0; l < kv.n_layer(); ++l) {
    if (kv.in_local_pool(l) != c.local) continue;
    for (uint32_t h = 0; h < kv.n_head_kv(); ++h) {
      std::memcpy(kv.k_bytes(l, static_cast<int32_t>(dst), h), kv.k_bytes(l, static_cast<int32_t>(src), h), n);
      std::memcpy(kv.v_bytes(l, static_cast<int32_t>(dst), h), kv.v_bytes(l, static_cast<int32_t>(src), h), n);
    }
  }
}

// One block's KV as the disk tier keeps it: per global layer, per KV head, K then V
// (kv_pool::block_bytes() in all). Calls copy(pool bytes, offset in the block's bytes, n).
template <class Copy>
void each_block_part(kv_pool& kv, block_id b, Copy&& copy) {
  const size_t n = kv.head_block_bytes();
  const auto blk = static_cast<int32_t>(b);
  size_t at = 0;
  for (uint32_t l = 0; l < kv.n_layer(); ++l) {
    if (kv.in_local_pool(l)) continue;
    for (uint32_t h = 0; h < kv.n_head_kv(); ++h) {
      copy(kv.k_bytes(l, blk, h), at, n);
      copy(kv.v_bytes(l, blk, h), at + n, n);
      at += 2 * n;
    }
  }
}

// The disk tier's part of a step (engine/kv/disk_transfer.h), before anything else in it:
// spilled blocks' KV is copied out and sent to the disk tier (which writes it on its own
// thread), then blocks read from disk are written in. Returns an error or "".
std::string move_disk_blocks(device_worker_actor::stateful_pointer<device_worker_state> self, const disk_transfer& t) {
  auto& kv = *self->state.kv;
  const size_t bytes = kv.block_bytes();
  if (!t.spills.empty() && self->state.spill_to) {
    std::vector<kv_block_blob> blobs(t.spills.size());
    for (size_t i = 0; i < t.spills.size(); ++i) {
      const auto& s = t.spills[i];
      blobs[i].key = {s.hash, s.parent, s.tokens};
      blobs[i].bytes.resize(bytes);
      std::byte* out = blobs[i].bytes.data();
      each_block_part(kv, s.block, [out](const std::byte* pool, size_t at, size_t n) { std::memcpy(out + at, pool, n); });
    }
    self->send(self->state.spill_to, kv_save_atom::value, std::move(blobs));
  }
  for (const auto& in : t.imports) {
    if (!in.bytes || in.bytes->size() != bytes) {
      return "a KV block read from the disk tier has " + std::to_string(in.bytes ? in.bytes->size() : 0) +
             " bytes, a block of this cache has " + std::to_string(bytes);
    }
    const std::byte* src = in.bytes->data();
    each_block_part(kv, in.block, [src](std::byte* pool, size_t at, size_t n) { std::memcpy(pool, src + at, n); });
  }
  return "";
}

// Prompt logprobs: every scored row is one log-softmax pass over the vocabulary, each
// independent, so the step's rows are spread over the compute pool. Returns an error or "".
std::string score_prompts(device_worker_state& st, const device_step& step, device_step_result& res) {
  std::vector<std::pair<size_t, uint32_t>> rows;  // (sequence, row)
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const uint32_t n = st.seqs->scored_rows(step.seqs[i]);
    if (n == 0) continue;
    res.prompt_logprobs.resize(step.seqs.size());
    res.prompt_logprobs[i].resize(n);
    for (uint32_t j = 0; j < n; ++j) rows.emplace_back(i, j);
  }
  if (rows.empty()) return "";
  std::vector<std::string> errors(rows.size());
  st.m->pool().parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t k, int) {
    const auto [i, j] = rows[static_cast<size_t>(k)];
    try {
      res.prompt_logprobs[i][j] = st.seqs->score(step.seqs[i], j, st.output.row(i, static_cast<int32_t>(j)));
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(k)] = e.what();
    }
  });
  for (auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
}

device_step_result run_step(device_worker_state& st, const device_step& step) {
  // The worker is detached: this is its own thread, which also leads the compute pool.
  // Named so profilers and the serving benchmark can tell model compute from the rest.
  thread_local const bool named = pthread_setname_np(pthread_self(), "tandem-device") == 0;
  (void)named;
  device_step_result res;
  res.step = step.step;
  res.emitted.assign(step.seqs.size(), {});
  res.logprobs.resize(step.seqs.size());
  const auto t0 = clock_type::now();
  try {
    st.seqs->begin(step, st.input);
    for (const auto& c : step.copies) copy_block(*st.kv, c);
    if (fault_point("device.forward")) throw std::runtime_error("an injected fault in the forward pass");
    st.m->forward(st.input, *st.kv, st.output);
  } catch (const std::exception& e) {
    res.error = e.what();
    return res;
  }
  res.forward_ms = ms_since(t0);

  const auto t1 = clock_type::now();
  // Each sampled sequence is independent (its own sampler and random stream, per-thread
  // scratch space), so the batch is sampled on the compute pool: the same tokens as one
  // after another, in a fraction of the time.
  std::vector<size_t> sampled;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    if (st.input.seqs[i].want_hidden) {  // an embedding sequence: pooled, never sampled
      try {
        res.pooled.resize(step.seqs.size());
        res.pooled[i] = st.seqs->pool(step.seqs[i], st.output.hidden_rows(i, st.input.seqs[i].tokens.size()),
                                      st.output.n_embd, st.head ? &*st.head : nullptr, st.m->config().causal);
      } catch (const std::exception& e) {
        res.error = e.what();
        return res;
      }
    } else if (step.seqs[i].sample) {
      sampled.push_back(i);
    }
  }
  std::vector<std::string> errors(sampled.size());
  auto sample_one = [&](int64_t k, int) {
    const size_t i = sampled[static_cast<size_t>(k)];
    try {
      // Every row with drafts; otherwise the last (a prompt-scoring chunk returns them all).
      std::vector<std::span<const float>> rows;
      const int32_t first = step.seqs[i].draft.empty() ? st.output.n_rows[i] - 1 : 0;
      for (int32_t j = first; j < st.output.n_rows[i]; ++j) rows.push_back(st.output.row(i, j));
      res.emitted[i] = st.seqs->sample(step.seqs[i], rows, res.logprobs[i]);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(k)] = e.what();
    }
  };
  if (sampled.size() == 1) {
    sample_one(0, 0);
  } else if (sampled.size() > 1) {
    st.m->pool().parallel_for(static_cast<int64_t>(sampled.size()), sample_one);
  }
  for (const auto& e : errors) {
    if (!e.empty()) {
      res.error = e;
      return res;
    }
  }
  if (std::string e = score_prompts(st, step, res); !e.empty()) {
    res.error = std::move(e);
    return res;
  }
  res.sample_ms = ms_since(t1);
  ++st.stats.steps;
  st.stats.tokens += step.n_tokens();
  st.stats.busy_ms += res.forward_ms + res.sample_ms;
  return res;
}

device_worker_actor::behavior_type cpu_device_worker(device_worker_actor::stateful_pointer<device_worker_state> self,
                                                     std::shared_ptr<model> m, uint32_t n_blocks, uint32_t block_size,
                                                     kv_cache_dtype dtype, uint32_t n_local_blocks,
                                                     kv_disk_actor spill_to) {
  kv_pool_options opts;
  opts.block_tokens = static_cast<int>(block_size);
  opts.dtype = dtype;
  opts.local_blocks = static_cast<int32_t>(n_local_blocks);
  opts.capacity_tokens = static_cast<int64_t>(n_blocks) * block_size;
  self->state.kv = std::make_unique<kv_pool>(m->config(), opts);
  self->state.seqs = std::make_unique<device_sequences>();
  self->state.head = rank_head::from_gguf(m->file(), m->config().n_embd);
  self->state.m = std::move(m);
  self->state.spill_to = std::move(spill_to);
  return {
      [self](run_step_atom, const device_step& step) -> device_step_result {
        // Outside run_step's guard: the worker dies of it, as of a bug (its supervisor restarts it).
        if (fault_point("device.die")) throw std::runtime_error("an injected fault that ends the device worker");
        if (!step.disk.empty()) {
          if (std::string e = move_disk_blocks(self, step.disk); !e.empty()) {
            device_step_result res;
            res.step = step.step;
            res.emitted.assign(step.seqs.size(), {});
            res.logprobs.resize(step.seqs.size());
            res.error = std::move(e);
            return res;
          }
        }
        return run_step(self->state, step);
      },
      [self](stats_atom) -> device_stats { return self->state.stats; },
  };
}

}  // namespace

device_worker_actor spawn_cpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_blocks,
                                            uint32_t block_size, kv_cache_dtype dtype, uint32_t n_local_blocks,
                                            kv_disk_actor spill_to) {
  return sys.spawn<caf::detached>(cpu_device_worker, std::move(m), n_blocks, block_size, dtype, n_local_blocks,
                                  std::move(spill_to));
}

}  // namespace tandem
