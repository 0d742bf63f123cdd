#include "engine/schedule/drafting.h"

#include <algorithm>

namespace tandem {

drafting::drafting(const speculation_config& cfg, bool drafts_first)
    : policy_(cfg), drafts_first_(drafts_first), k_max_(std::max({cfg.k_max, cfg.k_min, 1u})) {}

std::vector<draft_query> drafting::queries(const step_planner& planner) {
  asked_.clear();
  std::vector<seq_id> candidates;
  for (seq_id s : planner.decoding()) {
    if (const auto it = seqs_.find(s); it == seqs_.end() || !it->second.excluded) candidates.push_back(s);
  }
  if (candidates.empty()) return {};
  n_decoding_ = static_cast<uint32_t>(candidates.size());
  base_tokens_ = planner.proposed_tokens();
  const auto k =
      drafts_first_ ? std::vector<uint32_t>(candidates.size(), k_max_) : policy_.plan(candidates, base_tokens_);
  if (std::all_of(k.begin(), k.end(), [](uint32_t n) { return n == 0; })) return {};
  std::vector<draft_query> out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& toks = planner.tokens(candidates[i]);
    auto& known = seqs_[candidates[i]].drafter_known;
    draft_query q;
    q.seq = candidates[i];
    q.new_tokens.assign(toks.begin() + known, toks.end());
    q.k = k[i];
    known = static_cast<uint32_t>(toks.size());
    out.push_back(std::move(q));
    asked_.push_back(candidates[i]);
  }
  return out;
}

void drafting::drafted(const draft_batch& drafts, step_planner& planner) {
  const size_t n = std::min(asked_.size(), drafts.size());
  std::vector<uint32_t> keep(n);
  for (size_t i = 0; i < n; ++i) keep[i] = static_cast<uint32_t>(drafts[i].tokens.size());
  if (std::all_of(keep.begin(), keep.end(), [](uint32_t k) { return k == 0; })) return;
  if (drafts_first_) {
    std::vector<draft_offer> offers;  // parallel to asked_ (an empty draft offers 0 tokens)
    for (size_t i = 0; i < n; ++i) offers.push_back({asked_[i], keep[i], drafts[i].evidence});
    const auto trimmed = policy_.trim(offers, n_decoding_, base_tokens_);
    for (size_t i = 0; i < n; ++i) keep[i] = i < trimmed.size() ? std::min(keep[i], trimmed[i]) : 0;
  }
  for (size_t i = 0; i < n; ++i) {
    if (keep[i] == 0 || !planner.contains(asked_[i])) continue;  // ended meanwhile
    planner.set_draft(asked_[i], {drafts[i].tokens.begin(), drafts[i].tokens.begin() + keep[i]});
    seqs_[asked_[i]].evidence = drafts[i].evidence;
  }
}

void drafting::completed(const planned_seq& p, std::span<const token_id> emitted) {
  if (p.draft.empty()) return;
  const auto accepted = emitted.empty() ? 0u : static_cast<uint32_t>(emitted.size()) - 1;
  outcomes_.push_back({p.seq, static_cast<uint32_t>(p.draft.size()), accepted, seqs_[p.seq].evidence});
}

void drafting::report(uint32_t step_tokens, double step_ms) {
  policy_.report(outcomes_, step_tokens, step_ms);
  outcomes_.clear();
}

void drafting::forget(seq_id seq) {
  policy_.forget(seq);
  seqs_.erase(seq);
}

}  // namespace tandem
