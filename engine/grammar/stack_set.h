// The matcher's state: a set of stacks of automaton states (a pushdown automaton's
// configurations), like llama.cpp's grammar stacks but with one DFA state per frame.
//
//   stack (bottom .. top):  [ root: after "value" ] [ object: after ":" ] [ string: in chars ]
//                             continuation states ...                       top: reads bytes
//
// Every stack in a set is expanded: its top state reads bytes (calls have been entered and
// rules that may end have been left, each choice its own stack). Ending the bottom rule sets
// `accepting`; with an unknown bottom (the mask's per-state precomputation) it sets `popped`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/grammar/grammar.h"

namespace tandem::grammar {

inline constexpr size_t kMaxStackDepth = 512;  // deeper paths are dropped (JSON nested past it)
inline constexpr size_t kMaxStacks = 1024;     // stacks one set may hold

class stack_set {
 public:
  // Flat: [n, s_0 .. s_n-1] per stack, s_n-1 the top.
  std::vector<int32_t> data;
  bool accepting = false;
  bool popped = false;
  uint32_t count = 0;

  void clear() {
    data.clear();
    accepting = popped = false;
    count = 0;
  }
  bool empty() const { return count == 0; }
  bool live() const { return count > 0 || accepting || popped; }
  void add(std::span<const int32_t> st);
  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < data.size();) {
      size_t n = static_cast<size_t>(data[i]);
      f(std::span<const int32_t>(data.data() + i + 1, n));
      i += n + 1;
    }
  }
  bool operator==(const stack_set& o) const { return data == o.data && accepting == o.accepting && popped == o.popped; }
};

// Expands `st` (its top may be any state) into `out`. `st` is a scratch stack, restored on
// return. base_unknown: ending the bottom rule sets out.popped instead of out.accepting.
void expand(const grammar& g, std::vector<int32_t>& st, stack_set& out, bool base_unknown);

// out = the expanded stacks of `in` after reading `byte` (out is cleared first).
void advance(const grammar& g, const stack_set& in, uint8_t byte, stack_set& out, std::vector<int32_t>& scratch,
             bool base_unknown);

}  // namespace tandem::grammar
