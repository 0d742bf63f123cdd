// The scheduler's plan as the model's step input (both device workers): each sequence's new
// tokens, start position and block table; drafted sequences need logits for every position,
// computed with decode numerics so verification equals decoding bit for bit.
#pragma once

#include "engine/model/step.h"
#include "engine/schedule/step_planner.h"

namespace tandem {

inline void fill_step_input(const step_plan_core& plan, step_input& in) {
  in.seqs.resize(plan.seqs.size());
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& p = plan.seqs[i];
    auto& s = in.seqs[i];
    s.seq = p.seq;
    s.tokens.assign(p.tokens.begin(), p.tokens.end());
    s.start_pos = static_cast<int32_t>(p.start_pos);
    s.blocks.assign(p.table.begin(), p.table.end());
    s.want_all_logits = !p.draft.empty();
    s.decode_numerics = !p.draft.empty();
  }
}

}  // namespace tandem
