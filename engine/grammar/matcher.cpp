#include "engine/grammar/matcher.h"

#include <algorithm>
#include <stdexcept>

namespace tandem::grammar {

matcher::matcher(std::shared_ptr<const compiled_grammar> g, size_t max_rollback)
    : g_(std::move(g)), max_rollback_(max_rollback) {
  history_.push_back({g_->initial(), false});
}

void matcher::push(stack_set s, bool ended_before) {
  history_.push_back({std::move(s), ended_before});
  while (history_.size() > max_rollback_ + 1) history_.pop_front();
}

bool matcher::accept_bytes(std::string_view bytes) {
  if (ended_) return false;
  const grammar& g = g_->automata();
  a_ = now();
  for (char c : bytes) {
    advance(g, a_, static_cast<uint8_t>(c), b_, ws_.scratch, false);
    if (!b_.live()) return false;
    std::swap(a_, b_);
  }
  push(a_, false);
  return true;
}

bool matcher::accept_token(int32_t id) {
  const vocabulary& v = g_->vocab();
  if (id < 0 || static_cast<size_t>(id) >= v.size()) return false;
  if (v.is_end(id)) {
    if (ended_ || !is_accepting()) return false;
    stack_set s = now();
    push(std::move(s), false);
    ended_ = true;
    return true;
  }
  const std::string& bytes = v.bytes(id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

void matcher::rollback(size_t n) {
  if (n > rollback_limit()) {
    throw std::out_of_range("grammar matcher: rollback of " + std::to_string(n) + " steps, only " +
                            std::to_string(rollback_limit()) + " kept");
  }
  for (size_t i = 0; i < n; ++i) {
    ended_ = history_.back().ended;
    history_.pop_back();
  }
}

void matcher::fill_mask(std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  if (ended_) return;
  g_->add_mask(now(), mask, ws_);
}

}  // namespace tandem::grammar
