#include "engine/schedule/step_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tandem {

double attention_cost_per_key(const model_config& c) {
  const double per_layer_weights = c.block_matrix_macs();
  const double per_layer_key = 2.0 * c.q_dim();                            // one QK^T dot product and one PV row
  return per_layer_weights > 0 ? per_layer_key / per_layer_weights : 0.0;  // both scale with the layers
}

uint32_t prefill_chunk_tokens(const planner_config& config, uint32_t start) {
  const double a = config.attention_cost_per_key;
  const double P = config.prefill_chunk;
  if (config.whole_prompts) return config.max_num_batched_tokens;  // the budget cuts, request() refuses a cut
  if (a <= 0) return config.prefill_chunk;
  // Largest c with (a/2) c^2 + (1 + a start) c - B <= 0, B = P (1 + a P / 2).
  const double b = 1.0 + a * start;
  const double B = P * (1.0 + a * P / 2.0);
  const double c = (-b + std::sqrt(b * b + 2.0 * a * B)) / a + 1e-9;  // c = P exactly at start 0
  return std::clamp<uint32_t>(static_cast<uint32_t>(c), 1, config.prefill_chunk);
}

step_planner::step_planner(planner_config config) : config_(config) {
  if (config_.max_num_seqs == 0 || config_.max_num_batched_tokens == 0 || config_.prefill_chunk == 0) {
    throw std::invalid_argument("scheduler limits must be positive");
  }
}

void step_planner::add(seq_id seq, const std::string& tenant, double weight, std::vector<token_id> prompt,
                       uint64_t cache_salt, double kv_share) {
  if (prompt.empty()) throw std::invalid_argument("a sequence needs at least one token");
  if (seqs_.count(seq)) throw std::invalid_argument("sequence id in use");
  auto& t = tenants_[tenant];
  if (t.index == 0) t.index = static_cast<uint32_t>(tenants_.size());
  t.weight = weight > 0 ? weight : 1.0;
  t.kv_share = kv_share > 0 && kv_share < 1 ? kv_share : 1.0;
  if (t.waiting.empty()) {
    // A tenant that was idle does not bank credit: it resumes at the least service of the
    // tenants that are waiting now (a virtual clock), never below its own.
    double floor = std::numeric_limits<double>::infinity();
    for (const auto& [name, other] : tenants_) {
      if (!other.waiting.empty()) floor = std::min(floor, other.service);
    }
    if (floor != std::numeric_limits<double>::infinity()) t.service = std::max(t.service, floor);
  }
  seq_state s;
  s.tenant = tenant;
  s.n_prompt = static_cast<uint32_t>(prompt.size());
  s.tokens = std::move(prompt);
  s.cache_salt = cache_salt;
  seqs_.emplace(seq, std::move(s));
  t.waiting.push_back(seq);
  ++n_waiting_;
}

void step_planner::add_forked(seq_id child, seq_id parent) {
  if (seqs_.count(child)) throw std::invalid_argument("sequence id in use");
  const auto& p = seqs_.at(parent);
  if (!p.running || p.n_computed < p.n_prompt) {
    throw std::invalid_argument("fork: the parent sequence is not running with its prompt computed");
  }
  seq_state s;
  s.tenant = p.tenant;
  s.cache_salt = p.cache_salt;
  s.n_prompt = p.n_prompt;
  s.tokens.assign(p.tokens.begin(), p.tokens.begin() + p.n_prompt);
  s.n_computed = p.n_prompt - 1;
  s.n_sent = p.n_prompt;
  s.running = true;
  s.table = p.table;
  s.local_table = p.local_table;
  seqs_.emplace(child, std::move(s));
  running_.push_back(child);
}

void step_planner::append_tokens(seq_id seq, std::span<const token_id> tokens) {
  auto& s = seqs_.at(seq);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.draft.clear();
}

void step_planner::limit_chunk(seq_id seq, uint32_t max_tokens) { seqs_.at(seq).max_chunk = std::max(1u, max_tokens); }

bool step_planner::remove(seq_id seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  const bool was_running = it->second.running;
  if (was_running) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    auto& q = tenants_[it->second.tenant].waiting;
    q.erase(std::find(q.begin(), q.end(), seq));
    --n_waiting_;
  }
  seqs_.erase(it);
  return was_running;
}

bool step_planner::is_running(seq_id seq) const {
  const auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.running;
}

void step_planner::set_draft(seq_id seq, std::vector<token_id> draft) {
  auto& s = seqs_.at(seq);
  if (s.running && s.tokens.size() == s.n_computed + 1) s.draft = std::move(draft);
}

std::vector<seq_id> step_planner::decoding() const {
  std::vector<seq_id> out;
  for (seq_id id : running_) {
    const auto& s = seqs_.at(id);
    if (s.tokens.size() == s.n_computed + 1) out.push_back(id);
  }
  return out;
}

reserve_request step_planner::request() const {
  reserve_request req;
  uint32_t budget = config_.max_num_batched_tokens;
  for (seq_id id : running_) {
    if (budget == 0) break;
    const auto& s = seqs_.at(id);
    // Pending tokens: the prompt rest or the last sampled token, plus any drafts to verify.
    const uint32_t pending = static_cast<uint32_t>(s.tokens.size() + s.draft.size()) - s.n_computed;
    // Decoding (pending = the last token plus its drafts) takes it all; only a prompt's rest
    // is cut to a chunk.
    const uint32_t decode = 1 + static_cast<uint32_t>(s.draft.size());
    const uint32_t chunk = pending > decode ? chunk_of(s, s.n_computed) : decode;
    const uint32_t n_new = std::min({pending, std::max(chunk, decode), budget});
    if (n_new == 0 || (config_.whole_prompts && n_new < pending)) continue;
    budget -= n_new;
    req.running.push_back({id, s.n_computed + n_new, s.n_computed, 0, {}});
  }

  // Waiting sequences in fair order: repeatedly the head of the tenant with least service,
  // charging the simulated service as we go so one proposal spreads across tenants.
  size_t slots = config_.max_num_seqs > running_.size() ? config_.max_num_seqs - running_.size() : 0;
  std::map<std::string, std::pair<double, size_t>> sim;  // tenant -> (service, next index)
  for (const auto& [name, t] : tenants_) {
    if (!t.waiting.empty()) sim[name] = {t.service, 0};
  }
  while (slots > 0 && budget > 0 && !sim.empty()) {
    auto best = sim.begin();
    for (auto it = sim.begin(); it != sim.end(); ++it) {
      if (it->second.first < best->second.first) best = it;
    }
    const auto& t = tenants_.at(best->first);
    const seq_id id = t.waiting[best->second.second];
    const auto& s = seqs_.at(id);
    // A prefix-cache hit moves the start (known only after the cache manager's lookup);
    // sizing as from position 0 at most overshoots the first chunk's cost once.
    const uint32_t max_compute = std::min({chunk_of(s, 0), budget, static_cast<uint32_t>(s.tokens.size())});
    if (config_.whole_prompts && max_compute < s.tokens.size()) break;  // whole, or it waits (in order)
    req.waiting.push_back({id, 0, 0, max_compute, {}});
    budget -= max_compute;
    --slots;
    best->second.first += static_cast<double>(max_compute) / t.weight;
    if (++best->second.second == t.waiting.size()) sim.erase(best);
  }
  return req;
}

reserve_request step_planner::propose() {
  auto req = request();
  proposed_head_ = req.waiting.empty() ? std::nullopt : std::optional<seq_id>(req.waiting.front().seq);
  for (auto& item : req.waiting) {
    auto& s = seqs_.at(item.seq);
    item.new_tokens.assign(s.tokens.begin() + s.n_sent, s.tokens.end());
    item.cache_salt = s.cache_salt;
    const auto& t = tenants_.at(s.tenant);
    item.quota_tenant = t.index;
    item.kv_share = t.kv_share;
    s.n_sent = static_cast<uint32_t>(s.tokens.size());
  }
  return req;
}

uint32_t step_planner::proposed_tokens() const {
  const auto req = request();
  uint32_t n = 0;
  for (const auto& r : req.running) n += r.n_tokens - r.write_from;
  for (const auto& w : req.waiting) n += w.max_compute;
  return n;
}

step_plan_core step_planner::finalize(const reserve_result& granted) {
  step_plan_core plan;
  plan.step = next_step_++;
  plan.copies = granted.copies;
  plan.preempted = granted.preempted;

  for (seq_id id : granted.preempted) {
    if (!seqs_.count(id)) continue;  // removed meanwhile; its blocks are freed already
    auto& s = seqs_.at(id);
    running_.erase(std::find(running_.begin(), running_.end(), id));
    s.running = false;
    s.n_computed = 0;  // recomputed from scratch (or from the prefix cache) later
    s.draft.clear();   // its drafts had no blocks; the drafter offers new ones once it runs
    s.table.clear();   // its blocks are freed
    s.local_table.clear();
    requeue_front(id);
  }

  const auto add_planned = [&](const reserve_grant& g, uint32_t n_cached) {
    auto& s = seqs_.at(g.seq);
    g.delta.apply(s.table, s.local_table);
    planned_seq p;
    p.seq = g.seq;
    p.start_pos = s.n_computed;
    const uint32_t known = std::min<uint32_t>(g.n_tokens, static_cast<uint32_t>(s.tokens.size()));
    p.n_new = known - s.n_computed;
    p.sample = known == s.tokens.size();
    if (p.sample && g.n_tokens > known) {  // the budget may have cut the drafts short
      p.draft.assign(s.draft.begin(), s.draft.begin() + (g.n_tokens - known));
    }
    s.draft.clear();
    p.n_cached = n_cached;
    p.delta = g.delta;
    plan.seqs.push_back(std::move(p));
  };
  for (const auto& g : granted.running) {
    if (!seqs_.count(g.seq)) {
      plan.orphaned.push_back(g.seq);
      continue;
    }
    add_planned(g, 0);
  }
  for (const auto& g : granted.admitted) {
    if (!seqs_.count(g.seq)) {
      plan.orphaned.push_back(g.seq);
      continue;
    }
    auto& s = seqs_.at(g.seq);
    auto& q = tenants_[s.tenant].waiting;
    q.erase(std::find(q.begin(), q.end(), g.seq));
    --n_waiting_;
    s.running = true;
    s.n_computed = g.n_cached;
    running_.push_back(g.seq);
    add_planned(g, g.n_cached);
  }
  const bool stuck = plan.seqs.empty() && plan.preempted.empty() && plan.orphaned.empty() && running_.empty();
  if (stuck && proposed_head_ && seqs_.count(*proposed_head_)) plan.unservable = proposed_head_;
  return plan;
}

void step_planner::complete(const planned_seq& planned, std::span<const token_id> emitted) {
  const auto it = seqs_.find(planned.seq);
  if (it == seqs_.end()) return;  // removed while the step ran
  auto& s = it->second;
  const uint32_t fed = planned.n_fed();
  if (planned.draft.empty()) {
    s.n_computed = planned.start_pos + fed;
  } else {
    // The last token and the accepted drafts are computed; rejected positions are not.
    const auto accepted = emitted.empty() ? 0u : static_cast<uint32_t>(emitted.size()) - 1;
    s.n_computed = planned.start_pos + 1 + accepted;
  }
  charge(s.tenant, fed);
  s.tokens.insert(s.tokens.end(), emitted.begin(), emitted.end());
}

std::vector<token_id> step_planner::fed_tokens(const planned_seq& p) const {
  const auto& toks = seqs_.at(p.seq).tokens;
  std::vector<token_id> out(toks.begin() + p.start_pos, toks.begin() + p.start_pos + p.n_new);
  out.insert(out.end(), p.draft.begin(), p.draft.end());
  return out;
}

std::span<const token_id> step_planner::take_unsent(seq_id seq) {
  auto& s = seqs_.at(seq);
  const auto out = std::span<const token_id>(s.tokens).subspan(s.n_sent);
  s.n_sent = static_cast<uint32_t>(s.tokens.size());
  return out;
}

void step_planner::charge(const std::string& tenant, uint32_t n_tokens) {
  auto& t = tenants_[tenant];
  t.service += static_cast<double>(n_tokens) / t.weight;
}

void step_planner::requeue_front(seq_id seq) {
  auto& t = tenants_[seqs_.at(seq).tenant];
  t.waiting.push_front(seq);
  ++n_waiting_;
}

}  // namespace tandem
