#include "engine/grammar/stack_set.h"

#include <algorithm>

namespace tandem::grammar {

void stack_set::add(std::span<const int32_t> st) {
  for (size_t i = 0; i < data.size();) {
    size_t n = static_cast<size_t>(data[i]);
    if (n == st.size() && std::equal(st.begin(), st.end(), data.begin() + static_cast<ptrdiff_t>(i) + 1)) return;
    i += n + 1;
  }
  if (count >= kMaxStacks) return;  // bounded: an ambiguous grammar loses its extra readings
  data.push_back(static_cast<int32_t>(st.size()));
  data.insert(data.end(), st.begin(), st.end());
  ++count;
}

void expand(const grammar& g, std::vector<int32_t>& st, stack_set& out, bool base_unknown) {
  const int32_t top = st.back();
  if (g.has_bytes(top)) out.add(st);
  auto [b, e] = g.calls(top);
  for (const grammar::call* c = b; c != e; ++c) {
    if (st.size() >= kMaxStackDepth) break;
    // A continuation that can only return is not pushed (a tail call): right recursion such
    // as `items ::= item ("," items)?` keeps a bounded stack.
    const bool tail = g.is_return_only(c->then);
    if (tail) {
      st.pop_back();
    } else {
      st.back() = c->then;
    }
    st.push_back(g.rule_start(c->rule));
    expand(g, st, out, base_unknown);
    st.pop_back();
    if (tail) {
      st.push_back(top);
    } else {
      st.back() = top;
    }
  }
  if (g.accepting(top)) {
    st.pop_back();
    if (st.empty()) {
      (base_unknown ? out.popped : out.accepting) = true;
    } else {
      expand(g, st, out, base_unknown);
    }
    st.push_back(top);
  }
}

void advance(const grammar& g, const stack_set& in, uint8_t byte, stack_set& out, std::vector<int32_t>& scratch,
             bool base_unknown) {
  out.clear();
  in.for_each([&](std::span<const int32_t> st) {
    int32_t t = g.next(st.back(), byte);
    if (t < 0) return;
    scratch.assign(st.begin(), st.end());
    scratch.back() = t;
    expand(g, scratch, out, base_unknown);
  });
}

}  // namespace tandem::grammar
