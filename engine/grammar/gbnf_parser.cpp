// GBNF text -> expression trees. Recursive descent over the bytes; whitespace and `#`
// comments separate items anywhere, and a rule ends where the next `name ::=` begins.
#include <cstdio>

#include "engine/grammar/grammar.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::grammar {
namespace {

constexpr int kMaxNesting = 256;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class parser {
 public:
  explicit parser(std::string_view text) : s_(text) {}

  std::vector<rule_def> parse() {
    std::vector<rule_def> rules;
    skip_space();
    while (pos_ < s_.size()) {
      rule_def r;
      r.line = line_;
      r.column = column();
      r.name = name();
      if (r.name.empty()) fail("expected a rule name");
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + r.name + "'");
      advance(3);
      r.body = alternatives(0);
      if (pos_ < s_.size() && !at_rule_start()) fail(std::string("unexpected '") + s_[pos_] + "'");
      rules.push_back(std::move(r));
    }
    if (rules.empty()) fail("the grammar has no rules");
    return rules;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw grammar_error("grammar:" + std::to_string(line_) + ":" + std::to_string(column()) + ": " + what);
  }
  int column() const { return static_cast<int>(pos_ - line_start_) + 1; }
  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i) {
      if (s_[pos_++] == '\n') {
        ++line_;
        line_start_ = pos_;
      }
    }
  }
  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance(1);
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') advance(1);
      } else {
        break;
      }
    }
  }
  std::string name() {
    size_t b = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) advance(1);
    return std::string(s_.substr(b, pos_ - b));
  }
  // At `name ::=`: the current rule has ended.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.substr(p, 3) == "::=";
  }
  expr make(expr::kind k) const {
    expr e;
    e.k = k;
    e.line = line_;
    e.column = column();
    return e;
  }

  expr alternatives(int depth) {
    if (depth > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
    expr alt = make(expr::kind::alternation);
    alt.children.push_back(sequence(depth));
    while (pos_ < s_.size() && s_[pos_] == '|') {
      advance(1);
      alt.children.push_back(sequence(depth));
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  expr sequence(int depth) {
    expr seq = make(expr::kind::sequence);
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '|' || c == ')' || at_rule_start()) break;
      expr item = primary(depth);
      skip_space();
      item = quantified(std::move(item));
      seq.children.push_back(std::move(item));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    if (seq.children.empty()) seq.k = expr::kind::empty;
    return seq;
  }

  expr quantified(expr item) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      int lo, hi;
      if (c == '*') {
        lo = 0, hi = -1;
        advance(1);
      } else if (c == '+') {
        lo = 1, hi = -1;
        advance(1);
      } else if (c == '?') {
        lo = 0, hi = 1;
        advance(1);
      } else if (c == '{') {
        advance(1);
        skip_space();
        lo = number();
        skip_space();
        hi = lo;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          advance(1);
          skip_space();
          hi = (pos_ < s_.size() && s_[pos_] == '}') ? -1 : number();
          skip_space();
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}' closing a repetition");
        advance(1);
        if (hi != -1 && hi < lo) fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "}: max < min");
      } else {
        break;
      }
      expr r = make(expr::kind::repeat);
      r.line = item.line;
      r.column = item.column;
      r.min = lo;
      r.max = hi;
      r.children.push_back(std::move(item));
      item = std::move(r);
      skip_space();
    }
    return item;
  }

  int number() {
    size_t b = pos_;
    long v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_] - '0');
      if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat));
      advance(1);
    }
    if (pos_ == b) fail("expected a number in a repetition");
    return static_cast<int>(v);
  }

  expr primary(int depth) {
    char c = s_[pos_];
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '.') {
      expr e = make(expr::kind::char_class);
      e.ranges.push_back({0, utf8::kMaxCodepoint});
      advance(1);
      return e;
    }
    if (c == '(') {
      int l = line_, col = column();
      advance(1);
      expr inner = alternatives(depth + 1);
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') {
        throw grammar_error("grammar:" + std::to_string(l) + ":" + std::to_string(col) + ": unclosed '('");
      }
      advance(1);
      return inner;
    }
    if (is_name_char(c)) {
      expr e = make(expr::kind::rule_ref);
      e.text = name();
      return e;
    }
    fail(std::string("unexpected '") + c + "'");
  }

  // One character of a literal or class, with escapes; returns the code point.
  char32_t character(char close) {
    if (pos_ >= s_.size()) fail(std::string("unterminated ") + (close == '"' ? "string" : "character class"));
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      advance(1);
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_];
      advance(1);
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '0':
          return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.':
        case '|':
        case '(':
        case ')':
        case '*':
        case '+':
        case '?':
        case '{':
        case '}':
          return static_cast<char32_t>(e);
        case 'x':
          return hex(2);
        case 'u':
          return hex(4);
        case 'U':
          return hex(8);
        default:
          fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    if (c < 0x80) {
      advance(1);
      return c;
    }
    utf8::decoded d = utf8::decode_lenient(s_, pos_);
    if (d.cp == utf8::kReplacement && d.length == 1) fail("invalid UTF-8 in the grammar text");
    advance(d.length);
    return d.cp;
  }
  char32_t hex(int n) {
    char32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= s_.size()) fail("unterminated hex escape");
      char c = s_[pos_];
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) fail(std::string("expected a hex digit, got '") + c + "'");
      v = v * 16 + static_cast<char32_t>(d);
      advance(1);
    }
    if (v > utf8::kMaxCodepoint) fail("code point above U+10FFFF");
    return v;
  }

  expr literal() {
    expr e = make(expr::kind::literal);
    advance(1);
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      if (s_[pos_] == '"') break;
      utf8::append(e.text, character('"'));
    }
    advance(1);
    if (e.text.empty()) e.k = expr::kind::empty;
    return e;
  }

  expr char_class() {
    expr e = make(expr::kind::char_class);
    advance(1);
    if (pos_ < s_.size() && s_[pos_] == '^') {
      e.negated = true;
      advance(1);
    }
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated character class");
      if (s_[pos_] == ']') break;
      char32_t lo = character(']');
      char32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        advance(1);
        hi = character(']');
        if (hi < lo) fail("character range with its end before its start");
      }
      e.ranges.push_back({lo, hi});
    }
    advance(1);
    if (e.ranges.empty() && !e.negated) fail("empty character class");
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

std::vector<rule_def> parse_gbnf(std::string_view text) {
  if (text.size() > kMaxGrammarBytes) {
    throw grammar_error("grammar: the text is " + std::to_string(text.size()) + " bytes, above the limit of " +
                        std::to_string(kMaxGrammarBytes));
  }
  return parser(text).parse();
}

}  // namespace tandem::grammar
