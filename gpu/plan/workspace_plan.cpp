#include "gpu/plan/workspace_plan.h"

#include "gpu/plan/launch_config.h"

#include <algorithm>

namespace tandem::gpu {
namespace {

size_t align_up(size_t n) { return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

}  // namespace

workspace_plan plan_workspace(const model_shape& m, const step_limits& lim) {
  workspace_plan p;
  size_t at = 0;
  auto take = [&](size_t& field, size_t bytes) {
    field = at;
    at = align_up(at + bytes);
  };
  const size_t T = lim.max_tokens, f = sizeof(float), i = sizeof(int32_t);
  take(p.x, T * m.n_embd * f);
  take(p.h, T * m.n_embd * f);
  take(p.q, T * m.q_dim() * f);
  take(p.k, T * m.kv_dim() * f);
  take(p.v, T * m.kv_dim() * f);
  take(p.attn, T * m.q_dim() * f);
  take(p.gate, T * m.n_ff * f);
  take(p.up, T * m.n_ff * f);
  take(p.logits, size_t{lim.max_logit_rows} * m.n_vocab * f);
  // One partial (running max, running sum, hd accumulators) per token, query head and split.
  take(p.partials, T * m.n_head * lim.max_splits * (m.head_dim + 2) * f);
  const size_t rows = std::max<size_t>(T, lim.max_logit_rows);
  const size_t widest = std::max({m.n_embd, m.q_dim(), m.n_ff});
  take(p.act_q, rows * widest);
  take(p.act_ds, rows * (widest / 32) * 2 * f);
  take(p.tokens, T * i);
  take(p.positions, T * i);
  take(p.row_seq, T * i);
  take(p.slots, T * i);
  take(p.out_rows, size_t{lim.max_logit_rows} * i);
  take(p.tables, size_t{lim.max_seqs} * lim.max_table_width * i);
  if (prefill_attention_supported(m.head_dim, m.n_head, m.n_head_kv)) {
    p.max_tiles = max_prefill_tiles(lim.max_tokens, lim.max_seqs, prefill_tile_tokens(m.n_head, m.n_head_kv));
  }
  take(p.tiles, size_t{p.max_tiles} * sizeof(prefill_tile));
  take(p.sampled, size_t{lim.max_logit_rows} * i);
  p.total = at;
  return p;
}

}  // namespace tandem::gpu
