#include "engine/schedule/step_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

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
                       uint64_t cache_salt, double kv_share, seq_class cls) {
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
  s.cls = cls;
  s.arrival_ms = now_ms_;
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
  s.cls = p.cls;  // the same request: its class, deadline and arrival
  s.arrival_ms = p.arrival_ms;
  seqs_.emplace(child, std::move(s));
  running_.push_back(child);
}

void step_planner::append_tokens(seq_id seq, std::span<const token_id> tokens) {
  auto& s = seqs_.at(seq);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.draft.clear();
}

void step_planner::limit_chunk(seq_id seq, uint32_t max_tokens) { seqs_.at(seq).max_chunk = std::max(1u, max_tokens); }

void step_planner::set_atomic_runs(seq_id seq, std::vector<uint32_t> runs) {
  if (runs.size() % 2 != 0) throw std::invalid_argument("atomic runs come in begin, end pairs");
  seqs_.at(seq).atomic = std::move(runs);
}

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

std::vector<seq_id> step_planner::waiting_order() const {
  // Each tenant's queue in its own order: preempted first, then earliest deadline, then the
  // shortest aged prompt; the deque's order (arrival) breaks ties.
  struct queue {
    double service;
    double weight;
    std::vector<seq_id> seqs;
    size_t next = 0;
  };
  std::vector<queue> queues;
  const auto key = [&](seq_id id) {
    const auto& s = seqs_.at(id);
    const double deadline = s.cls.deadline_ms > 0 ? s.cls.deadline_ms : std::numeric_limits<double>::infinity();
    const double aged =
        static_cast<double>(s.tokens.size()) - config_.aging_tokens_per_s * std::max(0.0, now_ms_ - s.arrival_ms) / 1e3;
    return std::make_tuple(s.cls.priority, !s.preempted, deadline, aged);
  };
  for (const auto& [name, t] : tenants_) {
    if (t.waiting.empty()) continue;
    queue q{t.service, t.weight, {t.waiting.begin(), t.waiting.end()}};
    std::stable_sort(q.seqs.begin(), q.seqs.end(), [&](seq_id a, seq_id b) { return key(a) < key(b); });
    queues.push_back(std::move(q));
  }
  // Class by class (most urgent first), repeatedly the head of the tenant with least service,
  // charging the simulated service as we go so one proposal spreads across tenants.
  std::vector<seq_id> order;
  order.reserve(n_waiting_);
  while (order.size() < n_waiting_) {
    int32_t cls = std::numeric_limits<int32_t>::max();
    for (const auto& q : queues) {
      if (q.next < q.seqs.size()) cls = std::min(cls, seqs_.at(q.seqs[q.next]).cls.priority);
    }
    queue* best = nullptr;
    for (auto& q : queues) {
      if (q.next == q.seqs.size() || seqs_.at(q.seqs[q.next]).cls.priority != cls) continue;
      if (!best || q.service < best->service) best = &q;
    }
    const seq_id id = best->seqs[best->next++];
    const auto& s = seqs_.at(id);
    order.push_back(id);
    best->service += std::min<double>(chunk_of(s, 0), static_cast<double>(s.tokens.size())) / best->weight;
  }
  return order;
}

double step_planner::prompt_pressure() const {
  if (config_.target_ttft_ms <= 0) return 0;
  double pressure = 0;
  for (const auto& [id, s] : seqs_) {
    // Background work (a batch's) never presses; a sequence past its first token does not either.
    if (s.cls.priority >= config_.background_priority || s.tokens.size() > s.n_prompt) continue;
    const double allowance = s.cls.deadline_ms > s.arrival_ms ? s.cls.deadline_ms - s.arrival_ms : config_.target_ttft_ms;
    pressure = std::max(pressure, (now_ms_ - s.arrival_ms) / allowance);
    if (pressure >= 1) return 1;
  }
  return pressure;
}

double step_planner::prompt_time_ms(const step_shape& decode) const {
  if (config_.target_step_ms <= 0 || decode.decode_rows == 0 || !cost_.ready()) {
    return std::numeric_limits<double>::infinity();
  }
  return std::max(config_.target_step_ms - cost_.predict_ms(decode), prompt_share() * config_.target_step_ms);
}

double step_planner::prompt_share() const {
  return config_.min_prompt_share + (1 - config_.min_prompt_share) * prompt_pressure();
}

// request()'s step while it is built: the rows placed so far (their shape and the tokens
// each sequence computes), the token budget left, and the time each class may still add.
// The urgent class (top: the most urgent with any work) has urgent_limit; less urgent ones
// (a batch's) what the urgent work leaves within the target, at most kLowerShare of that
// work's own time (all of it when there is none), fixed once the urgent work is placed
// (the candidates come class by class).
class step_planner::step_build {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  static constexpr double kLowerShare = 0.1;

  step_build(const step_planner& planner, int32_t top)
      : p_(planner), cfg_(planner.config_), cost_(planner.cost_), top_(top), budget_(cfg_.max_num_batched_tokens) {}

  // Pending rows of a decoding sequence (its last token plus any drafts); 0 while it is
  // still computing its prompt.
  static uint32_t decode_rows_of(const seq_state& s) {
    const uint32_t pending = static_cast<uint32_t>(s.tokens.size() + s.draft.size()) - s.n_computed;
    return pending > 1 + s.draft.size() ? 0u : pending;
  }

  // A decoding sequence of the urgent class computes its rows (as far as the budget goes).
  void decode(seq_id id, const seq_state& s) {
    const uint32_t n_new = std::min(decode_rows_of(s), budget_);
    if (n_new == 0) return;
    budget_ -= n_new;
    shape_.add_rows(s.n_computed, n_new, false);
    set_n_new(id, n_new);
  }
  // A decoding sequence of a less urgent class: placed by add_deferred, if time allows.
  void defer(seq_id id) { deferred_.push_back(id); }

  // The step's time, once the urgent decode rows are placed: unlimited with nothing decoding
  // (nobody's pace is at stake) or without a target; else the target, and for prompts of the
  // urgent classes at least their floor share. A step of background work alone (a batch's)
  // is held to the target all the same, so what arrives next waits one target at most.
  void limit_time() {
    const bool background = top_ >= cfg_.background_priority && top_ != std::numeric_limits<int32_t>::max();
    const double prompt_ms = p_.prompt_time_ms(shape_);
    urgent_limit_ = prompt_ms != kInf ? cost_.predict_ms(shape_) + prompt_ms
                    : background && cfg_.target_step_ms > 0 && cost_.ready()
                        ? std::max(cfg_.target_step_ms, cost_.predict_ms(shape_))
                        : kInf;
  }

  // step_plan_core::budget_tokens: the decode rows plus the prompt tokens the time allows.
  uint32_t budget_tokens() {
    if (urgent_limit_ == kInf) return shape_.decode_rows + budget_;
    return shape_.decode_rows +
           std::max(cost_.prompt_tokens_within(time_left(top_), 0, budget_), std::min(budget_, cfg_.min_prompt_tokens));
  }

  uint32_t budget() const { return budget_; }

  // The tokens of a prompt chunk of class cls from `start` that the budget and the time allow
  // (the urgent classes' floor past the time).
  uint32_t fit(int32_t cls, uint32_t start, uint32_t want) {
    uint32_t c = std::min(want, budget_);
    const double left = time_left(cls);
    if (left == kInf) return c;
    uint32_t t = cost_.prompt_tokens_within(left, start, c);
    if (cls <= top_ && prompt_fed_ < cfg_.min_prompt_tokens) {
      t = std::max(t, std::min(c, cfg_.min_prompt_tokens - prompt_fed_));
    }
    return t;
  }

  // A prompt chunk of c tokens from `start` joins the step's shape and spends its budget.
  void take(uint32_t start, uint32_t c) {
    budget_ -= c;
    prompt_fed_ += c;
    shape_.add_rows(start, c, true);
  }
  // A running sequence computes n_new tokens this step (a chunk taken whole to the end of an
  // atomic run may be more than the budget it spent).
  void set_n_new(seq_id id, uint32_t n_new) { n_new_[id] = n_new; }

  // Less urgent decoding rows of classes up to cls, while the step stays within its limit.
  void add_deferred(int32_t cls) {
    if (cls > top_ && di_ < deferred_.size()) fix_lower_limit();
    for (; di_ < deferred_.size() && p_.seqs_.at(deferred_[di_]).cls.priority <= cls; ++di_) {
      const auto& s = p_.seqs_.at(deferred_[di_]);
      const uint32_t n_new = std::min(decode_rows_of(s), budget_);
      if (n_new == 0) continue;
      step_shape trial = shape_;
      trial.add_rows(s.n_computed, n_new, false);
      if (cost_.ready() && cost_.predict_ms(trial) > lower_limit_) continue;
      budget_ -= n_new;
      shape_ = trial;
      n_new_[deferred_[di_]] = n_new;
    }
  }

  // The tokens the step computes of a running sequence (none: it sits this step out).
  std::optional<uint32_t> n_new(seq_id id) const {
    const auto it = n_new_.find(id);
    return it == n_new_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }

 private:
  void fix_lower_limit() {
    if (std::exchange(lower_fixed_, true) || !cost_.ready()) return;
    const double urgent_ms = cost_.predict_ms(shape_);
    if (shape_.decode_rows + shape_.prompt_tokens > 0) lower_limit_ = urgent_ms * (1 + kLowerShare);
    if (urgent_limit_ != kInf) lower_limit_ = std::min(lower_limit_, cfg_.target_step_ms);
  }

  double time_left(int32_t cls) {
    if (cls > top_) fix_lower_limit();
    const double limit = cls <= top_ ? urgent_limit_ : lower_limit_;
    return limit == kInf ? limit : limit - cost_.predict_ms(shape_);
  }

  const step_planner& p_;
  const planner_config& cfg_;
  const step_cost_model& cost_;
  const int32_t top_;
  uint32_t budget_;
  step_shape shape_;  // the step so far: its rows and the keys they read
  std::unordered_map<seq_id, uint32_t> n_new_;
  double urgent_limit_ = kInf;
  double lower_limit_ = kInf;
  bool lower_fixed_ = false;
  uint32_t prompt_fed_ = 0;
  std::vector<seq_id> deferred_;
  size_t di_ = 0;
};

reserve_request step_planner::request(uint32_t* budget_tokens) const {
  // Running sequences by priority, then admission (oldest first): the pool preempts from the
  // back of the request, so the least urgent, newest goes first when blocks run short.
  std::vector<seq_id> order;
  for (seq_id id : running_) {
    if (std::find(victims_.begin(), victims_.end(), id) == victims_.end()) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](seq_id a, seq_id b) { return seqs_.at(a).cls.priority < seqs_.at(b).cls.priority; });
  const auto waiting = waiting_order();
  // The most urgent class with any work (decoding, computing its prompt, or waiting): its rows
  // and prompts go first; less urgent classes (a batch's) only extend the step a little.
  int32_t top = waiting.empty() ? std::numeric_limits<int32_t>::max() : seqs_.at(waiting.front()).cls.priority;
  if (!order.empty()) top = std::min(top, seqs_.at(order.front()).cls.priority);
  step_build step(*this, top);

  // 1. Decoding rows (the last token plus any drafts to verify): all of the most urgent class
  // that decodes; less urgent classes' rows (a batch's) only in the time the step has left.
  std::vector<seq_id> prefilling;
  for (seq_id id : order) {
    const auto& s = seqs_.at(id);
    if (step_build::decode_rows_of(s) == 0) {
      prefilling.push_back(id);
    } else if (s.cls.priority != top) {
      step.defer(id);
    } else {
      step.decode(id, s);
    }
  }
  step.limit_time();
  if (budget_tokens) *budget_tokens = step.budget_tokens();

  // 2. Prompt work, class by class: running prompts' next chunks, then waiting sequences; a
  // less urgent class's decoding rows go before its prompts.
  reserve_request req;
  size_t slots = config_.max_num_seqs > order.size() ? config_.max_num_seqs - order.size() : 0;  // victims' count
  size_t pi = 0, wi = 0;
  bool waiting_blocked = false;  // an encoder's prompt that must wait whole: the rest wait behind it
  while (step.budget() > 0) {
    const bool prefill_left = pi < prefilling.size();
    const bool waiting_left = !waiting_blocked && slots > 0 && wi < waiting.size();
    if (!prefill_left && !waiting_left) break;
    const bool prefill_first =
        prefill_left && (!waiting_left || seqs_.at(prefilling[pi]).cls.priority <= seqs_.at(waiting[wi]).cls.priority);
    const seq_id id = prefill_first ? prefilling[pi++] : waiting[wi++];
    const auto& s = seqs_.at(id);
    step.add_deferred(s.cls.priority);
    if (prefill_first) {
      const uint32_t pending = static_cast<uint32_t>(s.tokens.size()) - s.n_computed;
      uint32_t n_new = step.fit(s.cls.priority, s.n_computed, std::min(pending, chunk_of(s, s.n_computed)));
      if (n_new == 0 || (config_.whole_prompts && n_new < pending)) continue;
      n_new = chunk_end_outside_runs(s.atomic, s.n_computed, s.n_computed + n_new) - s.n_computed;
      step.take(s.n_computed, std::min(n_new, step.budget()));
      step.set_n_new(id, n_new);
      continue;
    }
    // A prefix-cache hit moves the start (known only after the cache manager's lookup);
    // sizing as from position 0 at most overshoots the first chunk's cost once.
    const uint32_t max_compute =
        step.fit(s.cls.priority, 0, std::min(chunk_of(s, 0), static_cast<uint32_t>(s.tokens.size())));
    if (max_compute == 0) break;
    if (config_.whole_prompts && max_compute < s.tokens.size()) {  // whole, or it waits (in order)
      waiting_blocked = true;
      continue;
    }
    req.waiting.push_back({id, 0, 0, max_compute, {}});
    step.take(0, max_compute);
    --slots;
  }
  step.add_deferred(std::numeric_limits<int32_t>::max());

  for (seq_id id : order) {
    const auto n_new = step.n_new(id);
    if (!n_new) continue;
    const uint32_t from = seqs_.at(id).n_computed;
    req.running.push_back({id, from + *n_new, from, 0, {}});
  }
  return req;
}

std::vector<seq_id> step_planner::choose_victims() const {
  std::vector<seq_id> victims;
  if (n_waiting_ == 0 || running_.empty()) return victims;
  // Candidates: the least urgent first, newest first among equals.
  std::vector<seq_id> cand(running_.rbegin(), running_.rend());
  std::stable_sort(cand.begin(), cand.end(),
                   [&](seq_id a, seq_id b) { return seqs_.at(a).cls.priority > seqs_.at(b).cls.priority; });
  const int32_t least_urgent = seqs_.at(cand.front()).cls.priority;
  std::vector<int32_t> urgent;  // waiting priorities more urgent than some running one
  for (const auto& [name, t] : tenants_) {
    for (seq_id id : t.waiting) {
      if (seqs_.at(id).cls.priority < least_urgent) urgent.push_back(seqs_.at(id).cls.priority);
    }
  }
  std::sort(urgent.begin(), urgent.end());
  constexpr size_t kMaxPerStep = 8;  // displaced a few at a time: each recomputes its prompt later
  if (urgent.size() > kMaxPerStep) urgent.resize(kMaxPerStep);
  // The running set is full: each urgent arrival beyond the free slots displaces one.
  size_t free_slots = config_.max_num_seqs > running_.size() ? config_.max_num_seqs - running_.size() : 0;
  size_t next = 0;
  for (int32_t p : urgent) {
    if (free_slots > 0) {
      --free_slots;
      continue;
    }
    if (next == cand.size() || seqs_.at(cand[next]).cls.priority <= p) break;
    victims.push_back(cand[next++]);
  }
  // The pool is short: the head was proposed, not admitted, and nothing was preempted for it.
  if (victims.empty() && head_starved_ && proposed_head_ && seqs_.count(*proposed_head_)) {
    const int32_t p = seqs_.at(*proposed_head_).cls.priority;
    if (seqs_.at(cand.front()).cls.priority > p) victims.push_back(cand.front());
  }
  return victims;
}

double step_planner::predicted_ttft_ms(int32_t priority, uint32_t n_prompt) const {
  if (!cost_.ready()) return 0;
  // Prompt tokens ahead: every waiting or prefilling sequence at this priority or more urgent.
  double ahead = n_prompt;
  step_shape decode;
  for (seq_id id : running_) {
    const auto& s = seqs_.at(id);
    if (s.tokens.size() > s.n_computed + 1) {
      if (s.cls.priority <= priority) ahead += static_cast<double>(s.tokens.size() - s.n_computed);
    } else {
      decode.add_rows(s.n_computed, 1, false);
    }
  }
  for (const auto& [name, t] : tenants_) {
    for (seq_id id : t.waiting) {
      if (seqs_.at(id).cls.priority <= priority) ahead += static_cast<double>(seqs_.at(id).tokens.size());
    }
  }
  // A step's prompt tokens and its time under the current decode load.
  const double time = prompt_time_ms(decode);
  uint32_t per_step = config_.max_num_batched_tokens > decode.decode_rows
                          ? config_.max_num_batched_tokens - decode.decode_rows
                          : config_.min_prompt_tokens;
  if (time != std::numeric_limits<double>::infinity()) {
    per_step = std::max(config_.min_prompt_tokens, cost_.prompt_tokens_within(time, 0, per_step));
  }
  step_shape step = decode;
  step.add_rows(0, per_step, true);
  const double step_ms = std::max(1e-3, cost_.predict_ms(step));
  return std::ceil(ahead / std::max(1u, per_step)) * step_ms;
}

reserve_request step_planner::propose() {
  victims_ = choose_victims();  // before the proposal, which leaves them out
  auto req = request(&proposed_budget_);
  req.preempt = victims_;
  proposed_head_ = req.waiting.empty() ? std::nullopt : std::optional<seq_id>(req.waiting.front().seq);
  for (auto& item : req.waiting) {
    auto& s = seqs_.at(item.seq);
    item.new_tokens.assign(s.tokens.begin() + s.n_sent, s.tokens.end());
    item.cache_salt = s.cache_salt;
    item.atomic_runs = s.atomic;
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
  plan.budget_tokens = proposed_budget_;
  for (seq_id id : granted.preempted) {
    if (std::find(victims_.begin(), victims_.end(), id) != victims_.end()) ++plan.priority_preempted;
  }
  victims_.clear();
  // The head of the proposal found no room although nothing was preempted for it: the next
  // proposal may displace a less urgent running sequence for it (choose_victims).
  head_starved_ = proposed_head_ && granted.preempted.empty() &&
                  std::none_of(granted.admitted.begin(), granted.admitted.end(),
                               [&](const reserve_grant& g) { return g.seq == *proposed_head_; });

  for (seq_id id : granted.preempted) {
    if (!seqs_.count(id)) continue;  // removed meanwhile; its blocks are freed already
    auto& s = seqs_.at(id);
    running_.erase(std::find(running_.begin(), running_.end(), id));
    s.running = false;
    s.n_computed = 0;  // recomputed from scratch (or from the prefix cache) later
    s.draft.clear();   // its drafts had no blocks; the drafter offers new ones once it runs
    s.table.clear();   // its blocks are freed
    s.local_table.clear();
    s.preempted = true;
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
    s.preempted = false;
    s.n_computed = g.n_cached;
    running_.push_back(g.seq);
    add_planned(g, g.n_cached);
  }
  for (const auto& p : plan.seqs) {
    // A chunk of known tokens is prompt work (also a preempted sequence's recomputation);
    // one token with its drafts is a decoding row.
    const bool prompt = p.draft.empty() && (p.n_new > 1 || p.start_pos + 1 < seqs_.at(p.seq).n_prompt);
    plan.shape.add_rows(p.start_pos, p.n_fed(), prompt);
  }
  plan.predicted_ms = cost_.predict_ms(plan.shape);
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
