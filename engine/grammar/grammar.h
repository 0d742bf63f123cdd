// A context-free grammar over bytes, compiled for matching: each rule is a deterministic
// automaton (DFA) whose edges read one byte or call another rule (a recursive transition
// network). The text form is GBNF, the dialect of llama.cpp's `grammar` field
// (docs/grammar.md):
//
//   root   ::= "{" ws pair ( "," ws pair )* "}"     # rules: name ::= alternatives
//   pair   ::= [a-z]+ ":" ws ( [0-9]{1,3} | "null" ) # "literal", [class], [^negated], .
//   ws     ::= [ \t\n]*                              # ( group ), * + ? {m} {m,} {m,n}
//
// Literals and classes are Unicode text (UTF-8); a class becomes the byte sequences of its
// code points, so the automata read bytes and a token may end inside a character.
//
//   rule "pair"      state 0 --[a-z]--> 1 --[a-z]--> 1 --":"--> 2 --call ws--> 3 ...
//   (global state ids; `next(s, byte)` is one table lookup, calls are listed per state)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::grammar {

// Bounds on what a grammar may make the compiler hold.
inline constexpr size_t kMaxGrammarBytes = 1 << 20;
inline constexpr int kMaxRepeat = 4096;        // largest m or n of {m,n}
inline constexpr size_t kMaxStates = 1 << 15;  // DFA states, all rules together (1 KiB each)
inline constexpr size_t kMaxNfaStates = 1 << 20;

// A parse or compile error; what() is "grammar:LINE:COL: message" for the text form.
struct grammar_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The parsed text form (an expression tree per rule).
struct expr {
  enum class kind { empty, literal, char_class, rule_ref, sequence, alternation, repeat };
  kind k = kind::empty;
  std::string text;                                   // literal bytes, or the rule's name
  std::vector<std::pair<char32_t, char32_t>> ranges;  // char_class: code point ranges
  bool negated = false;                               // char_class: [^...]
  std::vector<expr> children;                         // sequence, alternation; repeat: one
  int min = 0, max = -1;                              // repeat: max -1 = unbounded
  int line = 0, column = 0;                           // where it starts in the text
};

struct rule_def {
  std::string name;
  expr body;
  int line = 0, column = 0;
};

// Parses GBNF text. Throws grammar_error naming line and column.
std::vector<rule_def> parse_gbnf(std::string_view text);

class compiled_grammar_data;

// The automata of all rules. Immutable once built.
class grammar {
 public:
  // Compiles rules; `root` names the start rule. Throws grammar_error for an undefined or
  // duplicate rule, left recursion (a rule reaching itself without reading a byte), or a
  // grammar past the bounds above.
  static grammar compile(const std::vector<rule_def>& rules, std::string_view root = "root");
  static grammar from_gbnf(std::string_view text, std::string_view root = "root");

  int32_t start_state() const { return rule_start_[root_]; }
  size_t state_count() const { return accepting_.size(); }
  size_t rule_count() const { return rule_names_.size(); }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }

  // The state reached from s by reading `byte`, -1 if none.
  int32_t next(int32_t s, uint8_t byte) const { return next_[static_cast<size_t>(s) * 256 + byte]; }
  bool has_bytes(int32_t s) const { return flags_[s] & kHasBytes; }
  // The rule may end in state s (its caller then continues).
  bool accepting(int32_t s) const { return accepting_[s]; }
  // Reads bytes and nothing else: a walk may replace the top of a stack by it in place.
  bool is_simple(int32_t s) const { return flags_[s] == kHasBytes && !accepting_[s]; }
  // A continuation that can only return: pushing it would change nothing.
  bool is_return_only(int32_t s) const { return accepting_[s] && !(flags_[s] & (kHasBytes | kHasCalls)); }
  struct call {
    int32_t rule;
    int32_t then;  // the state to continue in once the rule ends
  };
  std::pair<const call*, const call*> calls(int32_t s) const {
    return {calls_.data() + call_begin_[s], calls_.data() + call_begin_[s + 1]};
  }
  int32_t rule_start(int32_t rule) const { return rule_start_[rule]; }
  int32_t rule_of(int32_t s) const { return rule_of_[s]; }

 private:
  static constexpr uint8_t kHasBytes = 1, kHasCalls = 2;
  friend class grammar_builder;
  std::vector<std::string> rule_names_;
  std::vector<int32_t> rule_start_;
  int32_t root_ = 0;
  std::vector<int32_t> next_;  // [state * 256 + byte]
  std::vector<uint8_t> accepting_, flags_;
  std::vector<int32_t> rule_of_;
  std::vector<uint32_t> call_begin_;  // [state_count + 1] into calls_
  std::vector<call> calls_;
};

// The UTF-8 byte sequences of the code points in [lo, hi] (surrogates left out): each
// sequence is a list of byte ranges, one per byte. Exposed for the tests.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi);

}  // namespace tandem::grammar
