#include "actors/device/device_sequences.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

#include "actors/sampling_params_from.h"
#include "engine/kv/reservation.h"
#include "engine/sampling/speculative.h"
#include "engine/sampling/token_mask.h"

namespace tandem {

device_sequences::sequence::sequence(const device_seq_start& start)
    : s(sampling_params_from(start.sampling)),
      options(start.sampling),
      n_prompt(start.n_prompt),
      seed(start.sampling.seed >= 0 ? static_cast<uint64_t>(start.sampling.seed) : std::random_device{}()) {
  if (start.grammar) grammar.emplace(start.grammar);
  pooling = start.pooling;
  adapter = start.adapter;
  adapter_scale = start.adapter_scale;
  media = start.media;
}

namespace {

// The rows of a constrained sequence, masked: row i with the state after drafts [0, i).
// Returns how many drafts the grammar accepted (the matcher advanced by them); rows past the
// first refused draft stay unmasked, since that draft's rejection ends the verification.
size_t mask_rows(grammar::matcher& m, std::span<const std::span<const float>> rows, std::span<const token_id> draft,
                 std::vector<std::vector<float>>& masked, std::vector<std::span<const float>>& out) {
  thread_local grammar::token_bitset mask;
  masked.resize(rows.size());
  out.clear();
  size_t accepted = 0;
  bool open = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    masked[i].assign(rows[i].begin(), rows[i].end());
    if (open) {
      mask.assign(m.grammar_ref().vocab().mask_words(), 0);
      m.fill_mask(mask);
      apply_token_mask(masked[i], mask);
      if (i < draft.size()) {
        open = m.allowed(mask, draft[i]) && m.accept_token(draft[i]);
        accepted += open ? 1 : 0;
      }
    }
    out.emplace_back(masked[i]);
  }
  return accepted;
}

}  // namespace

void device_sequences::begin(const device_step& step, step_input& in) {
  for (seq_id s : step.released) seqs_.erase(s);
  for (seq_id s : step.preempted) {
    if (auto it = seqs_.find(s); it != seqs_.end()) {
      it->second.table.clear();
      it->second.local_table.clear();
    }
  }
  for (const auto& start : step.started) seqs_.try_emplace(start.seq, start);

  in.seqs.resize(step.seqs.size());
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const auto& p = step.seqs[i];
    const auto it = seqs_.find(p.seq);
    if (it == seqs_.end()) {
      throw std::invalid_argument("step for sequence " + std::to_string(p.seq) + ", which the device does not hold");
    }
    auto& sq = it->second;
    sq.tokens.insert(sq.tokens.end(), p.new_tokens.begin(), p.new_tokens.end());
    p.delta.apply(sq.table, sq.local_table);
    const size_t end = static_cast<size_t>(p.start_pos) + p.n_new;
    if (sq.tokens.size() < end) {
      throw std::invalid_argument("step for sequence " + std::to_string(p.seq) + " computes up to position " +
                                  std::to_string(end) + " but the device holds " + std::to_string(sq.tokens.size()) +
                                  " of its tokens");
    }
    auto& s = in.seqs[i];
    s.seq = p.seq;
    s.tokens.assign(sq.tokens.begin() + p.start_pos, sq.tokens.begin() + static_cast<std::ptrdiff_t>(end));
    s.tokens.insert(s.tokens.end(), p.draft.begin(), p.draft.end());
    s.start_pos = static_cast<int32_t>(p.start_pos);
    s.blocks = sq.table;
    s.local_blocks = sq.local_table;
    // Drafted sequences need logits for every position, computed with decode numerics so
    // that verification equals decoding bit for bit.
    s.want_all_logits = !p.draft.empty() || scored_rows(p) > 0;
    s.decode_numerics = !p.draft.empty();
    s.want_hidden = sq.pooling != pooling_type::none;
    s.adapter = sq.adapter;
    s.adapter_scale = sq.adapter_scale;
    // The part of each embedding run this chunk computes, as offsets into its new tokens, and
    // what the image runs before the chunk moved multimodal RoPE's positions by.
    s.embeddings.clear();
    s.rope_shift = 0;
    for (const embedding_rows& e : sq.media) {
      if (int64_t{e.offset} + e.count <= static_cast<int64_t>(p.start_pos)) s.rope_shift += rope_shift_after(e);
      const auto lo = std::max<int64_t>(e.offset, p.start_pos);
      const auto hi = std::min<int64_t>(int64_t{e.offset} + e.count, static_cast<int64_t>(end));
      if (lo >= hi) continue;
      s.embeddings.push_back({static_cast<int32_t>(lo - p.start_pos), static_cast<int32_t>(hi - lo), e.rows,
                              static_cast<int32_t>(e.first + (lo - e.offset)), e.bidirectional, e.grid_w, e.grid_h});
    }
  }
}

std::vector<float> device_sequences::pool(const device_seq& p, std::span<const float> rows, int64_t width,
                                          const rank_head* head, bool causal) {
  auto& sq = seqs_.at(p.seq);
  if (p.start_pos == 0) sq.pooled.reset(row_pooling(sq.pooling, causal), width);
  sq.pooled.add(rows, p.start_pos);
  if (!p.sample) return {};
  auto v = sq.pooled.take();
  if (sq.pooling == pooling_type::rank) {
    if (head == nullptr)
      throw std::invalid_argument("rank pooling needs a classification head (cls.output) in the file");
    v = head->scores(v);
  }
  return v;
}

uint32_t device_sequences::scored_rows(const device_seq& p) const {
  const auto& sq = seqs_.at(p.seq);
  if (sq.options.prompt_logprobs < 0 || sq.pooling != pooling_type::none || !p.draft.empty() || sq.n_prompt < 2) {
    return 0;
  }
  // Positions start_pos + 1 ... up to the prompt's last, within this chunk's rows.
  const uint32_t last = std::min(p.start_pos + p.n_new, sq.n_prompt - 1);
  return last > p.start_pos ? last - p.start_pos : 0;
}

output_logprob device_sequences::score(const device_seq& p, uint32_t j, std::span<const float> row) const {
  const auto& sq = seqs_.at(p.seq);
  const size_t pos = static_cast<size_t>(p.start_pos) + j + 1;
  // The token after the chunk reaches the device with the next chunk: the plan names it.
  const token_id token = pos < sq.tokens.size() ? sq.tokens[pos] : p.next_token;
  if (token < 0 || static_cast<size_t>(token) >= row.size()) {
    throw std::invalid_argument("prompt logprobs: no token at position " + std::to_string(pos));
  }
  const auto r = logprobs_of(row, token, sq.options.prompt_logprobs, /*want_rank=*/true);
  output_logprob lp{token, r.logprob, r.rank, {}, {}};
  for (const auto& t : r.top) {
    lp.top_ids.push_back(t.token);
    lp.top_logprobs.push_back(t.logprob);
  }
  return lp;
}

std::span<const token_id> device_sequences::history(const device_seq& p) const {
  const auto& sq = seqs_.at(p.seq);
  const size_t last_end = static_cast<size_t>(p.start_pos) + p.n_new;
  const size_t n_prompt = std::min<size_t>(sq.n_prompt, last_end);
  return std::span<const token_id>(sq.tokens).subspan(n_prompt, last_end - n_prompt);
}

void device_sequences::record(const device_seq& p, std::span<const token_id> emitted) {
  auto& sq = seqs_.at(p.seq);
  sq.tokens.insert(sq.tokens.end(), emitted.begin(), emitted.end());
}

std::vector<token_id> device_sequences::sample(const device_seq& p, std::span<const std::span<const float>> rows,
                                               output_logprob& lp) {
  auto& sq = seqs_.at(p.seq);
  const auto hist = history(p);
  std::vector<token_id> emitted;
  size_t grammar_drafts = 0;  // drafts the matcher advanced by while masking
  if (sq.grammar) {
    thread_local std::vector<std::vector<float>> masked;
    thread_local std::vector<std::span<const float>> masked_rows;
    grammar_drafts = mask_rows(*sq.grammar, rows, p.draft, masked, masked_rows);
    rows = masked_rows;
  }
  if (!p.draft.empty()) {
    draft_proposal proposal;
    proposal.tokens = p.draft;  // n-gram and model drafts alike travel as point masses
    auto acc = accept_drafts(sq.s, rows, proposal, {hist.begin(), hist.end()});
    emitted = std::move(acc.tokens);
  } else {
    const auto r = sq.s.sample(rows.back(), hist);
    if (r.token >= 0) emitted = {r.token};
    if (sq.options.logprobs) {
      lp.token = r.token;
      lp.logprob = r.logprob;
      for (const auto& t : r.top) {
        lp.top_ids.push_back(t.token);
        lp.top_logprobs.push_back(t.logprob);
      }
    }
  }
  if (sq.grammar) {
    // The matcher stands after the drafts it accepted; it keeps those the target accepted
    // (all emitted tokens but the last), then takes the last.
    const size_t kept = emitted.empty() ? 0 : std::min(grammar_drafts, emitted.size() - 1);
    sq.grammar->rollback(grammar_drafts - kept);
    if (!emitted.empty()) sq.grammar->accept_token(emitted.back());
  }
  record(p, emitted);
  return emitted;
}

}  // namespace tandem
