// One sequence's position in its grammar: the stack set after the output so far, with the
// sets of the last few tokens kept for rollback (speculative decoding checks each draft
// token against the mask, accepts it, and rolls back those the target model rejects).
//
//   history:  [ set after token t-k ] ... [ set after token t-1 ] [ set now ]
//   accept_token(id): now' = advance(now, bytes of id); refused (state unchanged) if dead
//   rollback(n):      drop the last n sets
//   fill_mask():      compiled_grammar::add_mask(now) over a zeroed bitset
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>

#include "engine/grammar/compiled_grammar.h"

namespace tandem::grammar {

class matcher {
 public:
  // max_rollback: how many tokens rollback() can undo (older states are dropped).
  explicit matcher(std::shared_ptr<const compiled_grammar> g, size_t max_rollback = 32);

  // Reads the token's bytes; an end-of-generation token is accepted only where the grammar
  // accepts, and ends the matcher. Returns false (and changes nothing) if the grammar does
  // not allow the token here.
  bool accept_token(int32_t id);
  // Reads bytes as one step (one rollback unit). False and unchanged if not allowed.
  bool accept_bytes(std::string_view bytes);
  // The output so far is a complete sentence of the grammar.
  bool is_accepting() const { return now().accepting; }
  // An end token was accepted, or no byte can follow (only end tokens are allowed then).
  bool is_terminated() const { return ended_ || now().empty(); }
  // Undoes the last n accepted steps; throws std::out_of_range past what is kept.
  void rollback(size_t n);
  size_t rollback_limit() const { return history_.size() - 1; }

  // The allowed tokens now: mask.size() == vocab().mask_words(). After termination only the
  // end tokens (if accepting) are allowed.
  void fill_mask(std::span<uint64_t> mask);
  token_bitset mask() {
    token_bitset m(g_->vocab().mask_words());
    fill_mask(m);
    return m;
  }
  bool allowed(std::span<const uint64_t> mask, int32_t id) const { return (mask[id >> 6] >> (id & 63)) & 1; }

  const compiled_grammar& grammar_ref() const { return *g_; }
  const stack_set& state() const { return now(); }

 private:
  const stack_set& now() const { return history_.back().set; }
  struct step {
    stack_set set;
    bool ended = false;  // ended_ before this step
  };
  void push(stack_set s, bool ended_before);

  std::shared_ptr<const compiled_grammar> g_;
  size_t max_rollback_;
  std::deque<step> history_;
  bool ended_ = false;
  mask_workspace ws_;
  stack_set a_, b_;
};

}  // namespace tandem::grammar
