#include "engine/schedule/device_mirror.h"

#include <utility>

namespace tandem {

device_diff device_mirror::diff(step_plan_core& plan, const step_planner& planner) {
  device_diff out;
  out.released = std::exchange(released_, {});
  out.seqs.reserve(plan.seqs.size());
  for (auto& p : plan.seqs) {
    const auto [it, fresh] = held_.try_emplace(p.seq, 0);
    if (fresh) out.started.push_back(p.seq);
    device_seq d;
    d.seq = p.seq;
    d.start_pos = p.start_pos;
    d.n_new = p.n_new;
    d.draft = p.draft;
    d.sample = p.sample;
    d.delta = fresh ? table_delta::whole(planner.table(p.seq), planner.local_table(p.seq), p.delta.local_first)
                    : std::move(p.delta);
    const uint32_t end = p.start_pos + p.n_new;
    const auto& toks = planner.tokens(p.seq);
    if (end > it->second) {
      d.new_tokens.assign(toks.begin() + it->second, toks.begin() + end);
      it->second = end;
    }
    if (!p.sample && end < toks.size()) d.next_token = toks[end];
    out.seqs.push_back(std::move(d));
  }
  return out;
}

void device_mirror::emitted(seq_id seq, uint32_t n) {
  if (const auto it = held_.find(seq); it != held_.end()) it->second += n;
}

void device_mirror::release(seq_id seq) {
  if (held_.erase(seq) != 0) released_.push_back(seq);
}

void device_mirror::reset() {
  held_.clear();
  released_.clear();
}

}  // namespace tandem
