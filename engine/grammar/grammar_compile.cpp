// Expression trees -> one DFA per rule. Each rule's body becomes a Thompson NFA whose edges
// read a byte range, call a rule, or read nothing; the subset construction then makes it
// deterministic over the alphabet "bytes and rule calls":
//
//   ( "a" | [a-c] ) x*      NFA: 0 -a-> 1 -eps-> 4        DFA: {0} -a-> {1,2,4,5} -call x-> {5,..}
//                                0 -[a-c]-> 2 ...                 {0} -[bc]-> {2,4,5}
//
// Then left recursion (a rule that can reach a call of itself without reading a byte, which
// would make the matcher's expansion loop) is refused, naming the rules of the cycle.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "engine/grammar/grammar.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::grammar {

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  // Split off the surrogates and the boundaries of encoded length, then align each piece so
  // that every byte position ranges independently (all continuation bytes span a full
  // 6-bit block except at the ends).
  struct piece {
    char32_t lo, hi;
  };
  std::vector<piece> work{{lo, std::min<char32_t>(hi, utf8::kMaxCodepoint)}};
  while (!work.empty()) {
    piece p = work.back();
    work.pop_back();
    if (p.lo > p.hi) continue;
    if (p.lo <= 0xDFFF && p.hi >= 0xD800) {
      if (p.lo < 0xD800) work.push_back({p.lo, 0xD7FF});
      if (p.hi > 0xDFFF) work.push_back({0xE000, p.hi});
      continue;
    }
    bool split = false;
    for (char32_t edge : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
      if (p.lo <= edge && p.hi > edge) {
        work.push_back({p.lo, edge});
        work.push_back({edge + 1, p.hi});
        split = true;
        break;
      }
    }
    if (split) continue;
    size_t n = utf8::encoded_length(p.lo);
    for (size_t i = 1; i < n && !split; ++i) {
      char32_t m = (char32_t{1} << (6 * i)) - 1;
      if ((p.lo & ~m) != (p.hi & ~m)) {
        if ((p.lo & m) != 0) {
          work.push_back({p.lo, p.lo | m});
          work.push_back({(p.lo | m) + 1, p.hi});
          split = true;
        } else if ((p.hi & m) != m) {
          work.push_back({p.lo, (p.hi & ~m) - 1});
          work.push_back({p.hi & ~m, p.hi});
          split = true;
        }
      }
    }
    if (split) continue;
    std::string a = utf8::encode(p.lo), b = utf8::encode(p.hi);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (size_t i = 0; i < a.size(); ++i) seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
    out.push_back(std::move(seq));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Hash of a sorted set of NFA states (the subset construction's key).
struct set_hash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

class grammar_builder {
 public:
  explicit grammar_builder(const std::vector<rule_def>& rules) : rules_(rules) {
    for (size_t i = 0; i < rules.size(); ++i) {
      auto [it, fresh] = index_.emplace(rules[i].name, static_cast<int32_t>(i));
      if (!fresh) {
        throw grammar_error("grammar:" + std::to_string(rules[i].line) + ":" + std::to_string(rules[i].column) +
                            ": rule '" + rules[i].name + "' is defined twice");
      }
    }
  }

  grammar build(std::string_view root) {
    auto it = index_.find(std::string(root));
    if (it == index_.end()) throw grammar_error("grammar: no rule named '" + std::string(root) + "' to start from");
    g_.root_ = it->second;
    for (const rule_def& r : rules_) g_.rule_names_.push_back(r.name);
    g_.rule_start_.resize(rules_.size());
    std::vector<std::vector<call_edge>> calls;
    for (size_t r = 0; r < rules_.size(); ++r) build_rule(static_cast<int32_t>(r), calls);
    g_.call_begin_.push_back(0);
    for (auto& c : calls) {
      for (auto& e : c) g_.calls_.push_back({e.rule, e.to});
      g_.call_begin_.push_back(static_cast<uint32_t>(g_.calls_.size()));
    }
    for (size_t s = 0; s < g_.accepting_.size(); ++s) {
      if (g_.call_begin_[s + 1] > g_.call_begin_[s]) g_.flags_[s] |= grammar::kHasCalls;
    }
    check_left_recursion();
    return std::move(g_);
  }

 private:
  struct nfa_edge {
    enum kind_t : uint8_t { eps, bytes, call } kind;
    uint8_t lo = 0, hi = 0;
    int32_t rule = -1;
    int32_t to = -1;
  };
  struct call_edge {
    int32_t rule, to;
  };

  [[noreturn]] void fail_at(const expr& e, const std::string& what) const {
    throw grammar_error("grammar:" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + what);
  }

  int32_t new_state() {
    if (nfa_.size() >= kMaxNfaStates) {
      throw grammar_error("grammar: too large (more than " + std::to_string(kMaxNfaStates) + " automaton states)");
    }
    nfa_.emplace_back();
    return static_cast<int32_t>(nfa_.size() - 1);
  }
  void edge(int32_t from, nfa_edge e) { nfa_[from].push_back(e); }

  // Adds e's NFA from `from`; returns its end state.
  int32_t add(const expr& e, int32_t from) {
    switch (e.k) {
      case expr::kind::empty:
        return from;
      case expr::kind::literal: {
        int32_t cur = from;
        for (char c : e.text) {
          int32_t nxt = new_state();
          edge(cur, {nfa_edge::bytes, static_cast<uint8_t>(c), static_cast<uint8_t>(c), -1, nxt});
          cur = nxt;
        }
        return cur;
      }
      case expr::kind::char_class: {
        std::vector<std::pair<char32_t, char32_t>> r = e.ranges;
        std::sort(r.begin(), r.end());
        std::vector<std::pair<char32_t, char32_t>> merged;
        for (auto [lo, hi] : r) {
          if (!merged.empty() && lo <= merged.back().second + 1) {
            merged.back().second = std::max(merged.back().second, hi);
          } else {
            merged.push_back({lo, hi});
          }
        }
        if (e.negated) {
          std::vector<std::pair<char32_t, char32_t>> inv;
          char32_t next = 0;
          for (auto [lo, hi] : merged) {
            if (lo > next) inv.push_back({next, lo - 1});
            next = hi + 1;
          }
          if (next <= utf8::kMaxCodepoint) inv.push_back({next, utf8::kMaxCodepoint});
          merged = std::move(inv);
        }
        int32_t end = new_state();
        for (auto [lo, hi] : merged) {
          for (const auto& seq : utf8_sequences(lo, hi)) {
            int32_t cur = from;
            for (size_t i = 0; i < seq.size(); ++i) {
              int32_t nxt = i + 1 == seq.size() ? end : new_state();
              edge(cur, {nfa_edge::bytes, seq[i].first, seq[i].second, -1, nxt});
              cur = nxt;
            }
          }
        }
        return end;
      }
      case expr::kind::rule_ref: {
        auto it = index_.find(e.text);
        if (it == index_.end()) fail_at(e, "undefined rule '" + e.text + "'");
        int32_t to = new_state();
        edge(from, {nfa_edge::call, 0, 0, it->second, to});
        return to;
      }
      case expr::kind::sequence: {
        int32_t cur = from;
        for (const expr& c : e.children) cur = add(c, cur);
        return cur;
      }
      case expr::kind::alternation: {
        int32_t end = new_state();
        for (const expr& c : e.children) {
          int32_t start = new_state();
          edge(from, {nfa_edge::eps, 0, 0, -1, start});
          edge(add(c, start), {nfa_edge::eps, 0, 0, -1, end});
        }
        return end;
      }
      case expr::kind::repeat: {
        const expr& c = e.children[0];
        int32_t cur = from;
        for (int i = 0; i < e.min; ++i) cur = add(c, cur);
        if (e.max < 0) {
          int32_t loop = new_state();
          edge(cur, {nfa_edge::eps, 0, 0, -1, loop});
          int32_t body = new_state();
          edge(loop, {nfa_edge::eps, 0, 0, -1, body});
          edge(add(c, body), {nfa_edge::eps, 0, 0, -1, loop});
          return loop;
        }
        int32_t end = new_state();
        for (int i = e.min; i < e.max; ++i) {
          edge(cur, {nfa_edge::eps, 0, 0, -1, end});
          int32_t body = new_state();
          edge(cur, {nfa_edge::eps, 0, 0, -1, body});
          cur = add(c, body);
        }
        edge(cur, {nfa_edge::eps, 0, 0, -1, end});
        return end;
      }
    }
    return from;
  }

  std::vector<int32_t> closure(std::vector<int32_t> set) const {
    std::vector<int32_t> stack = set;
    std::vector<char>& seen = seen_;
    for (int32_t s : set) seen[s] = 1;
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      for (const nfa_edge& e : nfa_[s]) {
        if (e.kind == nfa_edge::eps && !seen[e.to]) {
          seen[e.to] = 1;
          set.push_back(e.to);
          stack.push_back(e.to);
        }
      }
    }
    for (int32_t s : set) seen[s] = 0;
    std::sort(set.begin(), set.end());
    return set;
  }

  void build_rule(int32_t r, std::vector<std::vector<call_edge>>& calls) {
    nfa_.clear();
    int32_t start = new_state();
    int32_t final_state = add(rules_[r].body, start);
    seen_.assign(nfa_.size(), 0);
    // Room for about one DFA state per NFA state, so the 1 KiB rows are rarely moved.
    const size_t want = g_.next_.size() + nfa_.size() * 256;
    if (want > g_.next_.capacity()) g_.next_.reserve(std::max(want, 2 * g_.next_.capacity()));

    std::unordered_map<std::vector<int32_t>, int32_t, set_hash> ids;  // NFA state set -> global DFA state
    std::vector<std::pair<std::vector<int32_t>, int32_t>> todo;
    auto state_for = [&](std::vector<int32_t> set) -> int32_t {
      auto it = ids.find(set);
      if (it != ids.end()) return it->second;
      size_t id = g_.accepting_.size();
      if (id >= kMaxStates) {
        throw grammar_error("grammar: too large (more than " + std::to_string(kMaxStates) + " states; rule '" +
                            rules_[r].name + "')");
      }
      g_.accepting_.push_back(std::binary_search(set.begin(), set.end(), final_state));
      g_.flags_.push_back(0);
      g_.rule_of_.push_back(r);
      g_.next_.resize(g_.next_.size() + 256, -1);
      calls.emplace_back();
      ids.emplace(set, static_cast<int32_t>(id));
      todo.push_back({std::move(set), static_cast<int32_t>(id)});
      return static_cast<int32_t>(id);
    };
    g_.rule_start_[r] = state_for(closure({start}));
    while (!todo.empty()) {
      auto [set, id] = std::move(todo.back());
      todo.pop_back();
      std::vector<int> cuts{0, 256};
      std::map<int32_t, std::vector<int32_t>> by_rule;
      for (int32_t s : set) {
        for (const nfa_edge& e : nfa_[s]) {
          if (e.kind == nfa_edge::bytes) {
            cuts.push_back(e.lo);
            cuts.push_back(e.hi + 1);
          } else if (e.kind == nfa_edge::call) {
            by_rule[e.rule].push_back(e.to);
          }
        }
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      // Each byte edge covers a run of the intervals [cuts[i], cuts[i + 1]).
      std::vector<std::vector<int32_t>> by_interval(cuts.size() - 1);
      for (int32_t s : set) {
        for (const nfa_edge& e : nfa_[s]) {
          if (e.kind != nfa_edge::bytes) continue;
          auto first = std::lower_bound(cuts.begin(), cuts.end(), static_cast<int>(e.lo)) - cuts.begin();
          for (auto i = static_cast<size_t>(first); cuts[i] <= e.hi; ++i) by_interval[i].push_back(e.to);
        }
      }
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        int lo = cuts[i], hi = cuts[i + 1] - 1;
        std::vector<int32_t>& targets = by_interval[i];
        if (targets.empty()) continue;
        std::sort(targets.begin(), targets.end());
        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
        int32_t to = state_for(closure(std::move(targets)));
        for (int b = lo; b <= hi; ++b) g_.next_[static_cast<size_t>(id) * 256 + b] = to;
        g_.flags_[id] |= grammar::kHasBytes;
      }
      for (auto& [rule, targets] : by_rule) {
        std::sort(targets.begin(), targets.end());
        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
        int32_t to = state_for(closure(std::move(targets)));
        calls[id].push_back({rule, to});
      }
    }
  }

  // nullable[r]: rule r can end without reading a byte. Then r "left-calls" R when a call of
  // R is reachable from r's start through calls of nullable rules only; a cycle there is
  // left recursion.
  void check_left_recursion() {
    size_t n_rules = rules_.size();
    std::vector<char> nullable(n_rules, 0);
    auto reach_without_bytes = [&](int32_t r, auto&& on_call) {
      std::vector<int32_t> stack{g_.rule_start_[r]};
      std::vector<char> seen(g_.accepting_.size(), 0);
      seen[stack[0]] = 1;
      bool can_end = false;
      while (!stack.empty()) {
        int32_t s = stack.back();
        stack.pop_back();
        if (g_.accepting_[s]) can_end = true;
        auto [b, e] = g_.calls(s);
        for (const grammar::call* c = b; c != e; ++c) {
          on_call(c->rule);
          if (nullable[c->rule] && !seen[c->then]) {
            seen[c->then] = 1;
            stack.push_back(c->then);
          }
        }
      }
      return can_end;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n_rules; ++r) {
        if (!nullable[r] && reach_without_bytes(static_cast<int32_t>(r), [](int32_t) {})) {
          nullable[r] = 1;
          changed = true;
        }
      }
    }
    std::vector<std::vector<int32_t>> left_calls(n_rules);
    for (size_t r = 0; r < n_rules; ++r) {
      reach_without_bytes(static_cast<int32_t>(r), [&](int32_t callee) { left_calls[r].push_back(callee); });
    }
    std::vector<int> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
    std::vector<int32_t> path;
    auto dfs = [&](auto&& self, int32_t r) -> void {
      color[r] = 1;
      path.push_back(r);
      for (int32_t c : left_calls[r]) {
        if (color[c] == 1) {
          std::string cycle;
          auto from = std::find(path.begin(), path.end(), c);
          for (auto it = from; it != path.end(); ++it) cycle += rules_[*it].name + " -> ";
          cycle += rules_[c].name;
          const rule_def& rd = rules_[c];
          throw grammar_error("grammar:" + std::to_string(rd.line) + ":" + std::to_string(rd.column) +
                              ": left recursion (" + cycle + " without reading a byte)");
        }
        if (color[c] == 0) self(self, c);
      }
      path.pop_back();
      color[r] = 2;
    };
    for (size_t r = 0; r < n_rules; ++r) {
      if (color[r] == 0) dfs(dfs, static_cast<int32_t>(r));
    }
  }

  const std::vector<rule_def>& rules_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<std::vector<nfa_edge>> nfa_;
  mutable std::vector<char> seen_;
  grammar g_;
};

grammar grammar::compile(const std::vector<rule_def>& rules, std::string_view root) {
  return grammar_builder(rules).build(root);
}

grammar grammar::from_gbnf(std::string_view text, std::string_view root) { return compile(parse_gbnf(text), root); }

}  // namespace tandem::grammar
