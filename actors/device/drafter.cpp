#include "actors/device/drafter.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include <algorithm>
#include <unordered_map>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/speculation/ngram_index.h"

namespace tandem {
namespace {

struct ngram_drafter_state {
  int min_n = 1, max_n = 3;
  std::unordered_map<seq_id, ngram_index> seqs;
  static inline const char* name = "tandem.drafter.ngram";
};

drafter_actor::behavior_type ngram_drafter(drafter_actor::stateful_pointer<ngram_drafter_state> self, int min_n,
                                           int max_n) {
  self->state.min_n = min_n;
  self->state.max_n = max_n;
  return {
      [self](draft_atom, const std::vector<draft_query>& queries) -> draft_batch {
        auto& st = self->state;
        draft_batch out;
        out.reserve(queries.size());
        for (const auto& q : queries) {
          auto& ix = st.seqs.try_emplace(q.seq, st.min_n, st.max_n).first->second;
          ix.append(q.new_tokens);
          auto p = ix.propose(q.k);
          out.push_back({std::move(p.tokens), p.match_len});
        }
        return out;
      },
      [self](forget_atom, const std::vector<seq_id>& seqs) {
        for (seq_id s : seqs) self->state.seqs.erase(s);
      },
  };
}

struct model_drafter_state {
  struct seq_state {
    block_table table;
    std::vector<int32_t> tokens;  // every real token of the sequence
    uint32_t valid = 0;           // the draft KV holds real tokens at positions < valid
  };
  std::shared_ptr<model> m;
  uint32_t n_layers = 0;
  std::unique_ptr<kv_pool> kv;
  std::unique_ptr<kv_block_allocator> alloc;
  std::unordered_map<seq_id, seq_state> seqs;
  step_input in;
  step_output out;
  static inline const char* name = "tandem.drafter.model";
};

// A draft always has a token: token 0 when the row holds nothing above -inf.
int32_t argmax(std::span<const float> row) { return std::max<int32_t>(0, first_max(row)); }

// Drafts for every query at once: a catch-up pass feeding each sequence's real tokens the
// draft KV has not seen (then its first draft), then K - 1 one-token passes.
draft_batch run_model_drafts(model_drafter_state& st, const std::vector<draft_query>& queries) {
  draft_batch drafts(queries.size());
  std::vector<size_t> active;  // queries that draft in this call
  for (size_t i = 0; i < queries.size(); ++i) {
    auto& s = st.seqs[queries[i].seq];
    s.tokens.insert(s.tokens.end(), queries[i].new_tokens.begin(), queries[i].new_tokens.end());
    if (queries[i].k == 0 || s.tokens.empty()) continue;
    const auto need = static_cast<int64_t>(s.tokens.size() + queries[i].k);
    if (!st.alloc->reserve(s.table, need, st.kv->block_tokens())) continue;  // pool full: no drafts
    active.push_back(i);
  }
  uint32_t max_k = 0;
  for (size_t i : active) max_k = std::max(max_k, queries[i].k);
  st.in.n_layers = st.n_layers;
  for (uint32_t round = 0; round < max_k; ++round) {
    st.in.seqs.clear();
    std::vector<size_t> fed;
    for (size_t i : active) {
      if (round >= queries[i].k) continue;
      auto& s = st.seqs[queries[i].seq];
      seq_step step;
      step.seq = queries[i].seq;
      step.blocks = s.table;
      if (round == 0) {
        s.valid = std::min<uint32_t>(s.valid, static_cast<uint32_t>(s.tokens.size()) - 1);
        step.start_pos = static_cast<int32_t>(s.valid);
        step.tokens.assign(s.tokens.begin() + s.valid, s.tokens.end());
        s.valid = static_cast<uint32_t>(s.tokens.size());
      } else {
        step.start_pos = static_cast<int32_t>(s.tokens.size() + round - 1);
        step.tokens = {drafts[i].tokens.back()};
      }
      st.in.seqs.push_back(std::move(step));
      fed.push_back(i);
    }
    if (fed.empty()) break;
    st.m->forward(st.in, *st.kv, st.out);
    for (size_t j = 0; j < fed.size(); ++j) drafts[fed[j]].tokens.push_back(argmax(st.out.last(j)));
  }
  return drafts;
}

drafter_actor::behavior_type model_drafter(drafter_actor::stateful_pointer<model_drafter_state> self,
                                           std::shared_ptr<model> m, uint32_t n_layers, uint32_t kv_tokens,
                                           uint32_t block_size) {
  auto& st = self->state;
  model_config cfg = m->config();
  if (n_layers > 0) cfg.n_layer = std::min(n_layers, cfg.n_layer);
  kv_pool_options opts;
  opts.block_tokens = static_cast<int>(block_size);
  opts.capacity_tokens = kv_tokens;
  st.kv = std::make_unique<kv_pool>(cfg, opts);
  st.alloc = std::make_unique<kv_block_allocator>(st.kv->n_blocks());
  st.m = std::move(m);
  st.n_layers = n_layers;
  return {
      [self](draft_atom, const std::vector<draft_query>& queries) -> draft_batch {
        try {
          return run_model_drafts(self->state, queries);
        } catch (const std::exception&) {
          return draft_batch(queries.size());  // no drafts: the step runs without them
        }
      },
      [self](forget_atom, const std::vector<seq_id>& seqs) {
        auto& known = self->state.seqs;
        for (seq_id s : seqs) {
          if (const auto it = known.find(s); it != known.end()) {
            self->state.alloc->release(it->second.table);
            known.erase(it);
          }
        }
      },
  };
}

}  // namespace

drafter_actor spawn_model_drafter(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_layers,
                                  uint32_t kv_tokens, uint32_t block_size) {
  return sys.spawn<caf::detached>(model_drafter, std::move(m), n_layers, kv_tokens, block_size);
}

drafter_actor spawn_ngram_drafter(caf::actor_system& sys, int min_n, int max_n) {
  return sys.spawn(ngram_drafter, min_n, max_n);
}

}  // namespace tandem
