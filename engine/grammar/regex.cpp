// A recursive-descent parser of the pattern (as code points) into a small tree, then GBNF:
//
//   alternation := sequence ( "|" sequence )*
//   sequence    := ( atom quantifier? )*
//   atom        := "(" ( "?:" | "?<name>" )? alternation ")" | "[" class "]" | "." | "\" escape | char
//
// A set of code points becomes what its characters are written as inside a JSON string:
// the characters themselves, but `"` as \", `\` as \\ and control characters as \n, \t, ...
// or \u00XX.
#include "engine/grammar/regex.h"

#include <algorithm>
#include <vector>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/grammar.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::grammar {
namespace {

using ranges = std::vector<std::pair<char32_t, char32_t>>;

struct node {
  enum class kind { set, sequence, alternation, repeat } k = kind::sequence;
  ranges set;                 // set: sorted, disjoint, not adjacent
  std::vector<node> kids;     // sequence, alternation; repeat: one
  int64_t min = 0, max = -1;  // repeat; max -1: unbounded
};

ranges normalized(ranges r) {
  std::sort(r.begin(), r.end());
  ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

ranges complement(const ranges& r) {
  ranges out;
  char32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= utf8::kMaxCodepoint) out.push_back({next, utf8::kMaxCodepoint});
  return out;
}

const ranges kDigit = {{'0', '9'}};
const ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMA-262 WhiteSpace and LineTerminator.
const ranges kSpace = normalized({{'\t', '\r'},
                                  {' ', ' '},
                                  {0xA0, 0xA0},
                                  {0x1680, 0x1680},
                                  {0x2000, 0x200A},
                                  {0x2028, 0x2029},
                                  {0x202F, 0x202F},
                                  {0x205F, 0x205F},
                                  {0x3000, 0x3000},
                                  {0xFEFF, 0xFEFF}});
const ranges kLineTerminators = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

node set_of(ranges r) {
  node n;
  n.k = node::kind::set;
  n.set = normalized(std::move(r));
  return n;
}

class parser {
 public:
  explicit parser(std::string_view pattern) {
    for (size_t i = 0; i < pattern.size();) {
      utf8::decoded d = utf8::decode_lenient(pattern, i);
      p_.push_back(d.cp);
      i += d.length;
    }
  }

  node parse() {
    node n = alternation(true);
    if (i_ < p_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] static void fail(const std::string& what) { throw regex_error(what); }
  bool at(char32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  bool at(std::u32string_view s) const { return p_.compare(i_, s.size(), s) == 0; }

  // top: the whole pattern, whose alternatives may start with ^ and end with $.
  node alternation(bool top) {
    node alt;
    alt.k = node::kind::alternation;
    alt.kids.push_back(sequence(top));
    while (at('|')) {
      ++i_;
      alt.kids.push_back(sequence(top));
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  node sequence(bool top) {
    node seq;
    if (top && at('^')) ++i_;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (at('$')) {
        ++i_;
        if (top && (i_ == p_.size() || at('|'))) break;
        fail("the anchor '$' inside the pattern is not supported (only at its end)");
      }
      if (at('^')) fail("the anchor '^' inside the pattern is not supported (only at its start)");
      node a = atom();
      quantify(a);
      seq.kids.push_back(std::move(a));
    }
    return seq.kids.size() == 1 ? std::move(seq.kids[0]) : seq;
  }

  // Reads digits at i_; false (i_ unchanged) if there are none.
  bool number(int64_t& out) {
    size_t j = i_;
    int64_t v = 0;
    while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
      v = std::min<int64_t>(v * 10 + (p_[j] - '0'), int64_t{1} << 40);
      ++j;
    }
    if (j == i_) return false;
    i_ = j;
    out = v;
    return true;
  }

  void quantify(node& a) {
    int64_t lo = -1, hi = -1;
    if (at('*')) {
      lo = 0;
    } else if (at('+')) {
      lo = 1;
    } else if (at('?')) {
      lo = 0;
      hi = 1;
    } else if (at('{')) {
      // {n} {n,} {n,m}; anything else is a literal '{' (ECMA-262 Annex B).
      size_t save = i_++;
      if (!number(lo)) {
        i_ = save;
        return;
      }
      hi = lo;
      if (at(',')) {
        ++i_;
        hi = -1;
        number(hi);
      }
      if (!at('}')) {
        i_ = save;
        lo = -1;
        return;
      }
      if (hi >= 0 && hi < lo) fail("quantifier {" + std::to_string(lo) + "," + std::to_string(hi) + "}: max < min");
      if (lo > kMaxRepeat || hi > kMaxRepeat) {
        fail("quantifier count above " + std::to_string(kMaxRepeat) + " is not supported");
      }
    } else {
      return;
    }
    ++i_;
    if (at('?')) ++i_;  // lazy: the same strings
    if (at('*') || at('+') || at('?')) fail("nothing to repeat before '" + utf8::encode(p_[i_]) + "'");
    node r;
    r.k = node::kind::repeat;
    r.min = lo;
    r.max = hi;
    r.kids.push_back(std::move(a));
    a = std::move(r);
  }

  node atom() {
    const char32_t c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at(U"?=") || at(U"?!"))
        fail("lookahead '(" + utf8::encode(p_[i_]) + utf8::encode(p_[i_ + 1]) + "' is not supported");
      if (at(U"?<=") || at(U"?<!")) fail("lookbehind '(?<" + utf8::encode(p_[i_ + 2]) + "' is not supported");
      if (at(U"?:")) {
        i_ += 2;
      } else if (at(U"?<")) {
        while (i_ < p_.size() && p_[i_] != '>') ++i_;
        if (i_ == p_.size()) fail("unterminated group name");
        ++i_;
      } else if (at('?')) {
        fail("the group modifier '(?" + (i_ + 1 < p_.size() ? utf8::encode(p_[i_ + 1]) : "") + "' is not supported");
      }
      if (++depth_ > kMaxGroupDepth) fail("groups nested deeper than " + std::to_string(kMaxGroupDepth));
      node inner = alternation(false);
      --depth_;
      if (!at(')')) fail("unclosed '('");
      ++i_;
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return set_of(complement(kLineTerminators));
    }
    if (c == '\\') return set_of(escape(false));
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat before '" + utf8::encode(c) + "'");
    if (c == ')') fail("unbalanced ')'");
    ++i_;
    return set_of({{c, c}});
  }

  // After a backslash (at i_). in_class: inside [...], where \b is a backspace.
  ranges escape(bool in_class) {
    ++i_;
    if (i_ >= p_.size()) fail("a '\\' at the end of the pattern");
    const char32_t c = p_[i_++];
    switch (c) {
      case 'd':
        return kDigit;
      case 'D':
        return complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return complement(kSpace);
      case 't':
        return {{'\t', '\t'}};
      case 'n':
        return {{'\n', '\n'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') fail("octal escapes are not supported");
        return {{0, 0}};
      case 'x':
        return single(hex(2));
      case 'u':
        if (at('{')) {
          ++i_;
          size_t start = i_;
          while (i_ < p_.size() && p_[i_] != '}') ++i_;
          if (i_ == p_.size() || i_ == start || i_ - start > 6) fail("bad escape '\\u{'");
          size_t end = i_;
          i_ = start;
          char32_t v = hex(end - start);
          ++i_;
          if (v > utf8::kMaxCodepoint) fail("escape '\\u{...}' beyond U+10FFFF");
          return single(v);
        }
        return single(hex(4));
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        fail("the word boundary '\\b' is not supported");
      case 'B':
        fail("the word boundary '\\B' is not supported");
      case 'p':
      case 'P':
        fail(std::string("the Unicode property escape '\\") + static_cast<char>(c) + "' is not supported");
      case 'c':
        fail("the control escape '\\c' is not supported");
      case 'k':
        fail("the backreference '\\k' is not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail("the backreference '\\" + utf8::encode(c) + "' is not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail("unknown escape '\\" + utf8::encode(c) + "'");
    return {{c, c}};  // \. \* \\ \/ \- ...: the character itself
  }

  static ranges single(char32_t c) { return {{c, c}}; }

  char32_t hex(size_t n) {
    char32_t v = 0;
    for (size_t k = 0; k < n; ++k, ++i_) {
      if (i_ >= p_.size()) fail("a hex escape is cut short");
      char32_t d = p_[i_];
      int x = d >= '0' && d <= '9'   ? static_cast<int>(d - '0')
              : d >= 'a' && d <= 'f' ? static_cast<int>(d - 'a' + 10)
              : d >= 'A' && d <= 'F' ? static_cast<int>(d - 'A' + 10)
                                     : -1;
      if (x < 0) fail("a hex escape has a non-hex digit");
      v = v * 16 + static_cast<char32_t>(x);
    }
    return v;
  }

  node char_class() {
    ++i_;  // [
    bool negated = false;
    if (at('^')) {
      negated = true;
      ++i_;
    }
    ranges r;
    while (i_ < p_.size() && !at(']')) {  // ECMA-262: [] matches nothing, [^] anything
      ranges lo_set = class_atom();
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        ranges hi_set = class_atom();
        if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
            hi_set[0].first != hi_set[0].second) {
          fail("a class range between character sets (like [\\d-z]) is not supported");
        }
        if (hi_set[0].first < lo_set[0].first) fail("a class range out of order");
        r.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        r.insert(r.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (!at(']')) fail("unterminated character class");
    ++i_;
    r = normalized(std::move(r));
    return set_of(negated ? complement(r) : r);
  }

  ranges class_atom() {
    if (at('\\')) return escape(true);
    if (at('[') && i_ + 1 < p_.size() && (p_[i_ + 1] == ':' || p_[i_ + 1] == '=' || p_[i_ + 1] == '.')) {
      fail("POSIX classes like [[:alpha:]] are not supported");
    }
    char32_t c = p_[i_++];
    return {{c, c}};
  }

  static constexpr int kMaxGroupDepth = 64;  // the GBNF of a group nests about three deep
  std::u32string p_;
  size_t i_ = 0;
  int depth_ = 0;
};

// Lengths in code points: [min, max], max -1 unbounded.
std::pair<int64_t, int64_t> length_of(const node& n) {
  switch (n.k) {
    case node::kind::set:
      return {1, 1};
    case node::kind::sequence: {
      int64_t lo = 0, hi = 0;
      for (const node& k : n.kids) {
        auto [a, b] = length_of(k);
        lo += a;
        hi = hi < 0 || b < 0 ? -1 : hi + b;
      }
      return {lo, hi};
    }
    case node::kind::alternation: {
      int64_t lo = -1, hi = 0;
      for (const node& k : n.kids) {
        auto [a, b] = length_of(k);
        lo = lo < 0 ? a : std::min(lo, a);
        hi = hi < 0 || b < 0 ? -1 : std::max(hi, b);
      }
      return {std::max<int64_t>(lo, 0), hi};
    }
    case node::kind::repeat: {
      auto [a, b] = length_of(n.kids[0]);
      int64_t hi = n.max < 0 ? (b == 0 ? 0 : -1) : (b < 0 ? -1 : b * n.max);
      return {a * n.min, hi};
    }
  }
  return {0, 0};
}

// Folds minLength / maxLength into the tree, or throws.
void apply_lengths(node& root, int64_t lo, int64_t hi) {
  auto [plo, phi] = length_of(root);
  if (plo >= lo && (hi < 0 || (phi >= 0 && phi <= hi))) return;  // implied by the pattern
  std::vector<node*> items;
  if (root.k == node::kind::sequence) {
    for (node& k : root.kids) items.push_back(&k);
  } else {
    items.push_back(&root);
  }
  node* variable = nullptr;
  bool other = false;  // a variable item that is not one repeated class
  int64_t fixed = 0;
  for (node* k : items) {
    auto [a, b] = length_of(*k);
    if (a == b) {
      fixed += a;
    } else if (!variable && k->k == node::kind::repeat && k->kids[0].k == node::kind::set) {
      variable = k;
    } else {
      other = true;
    }
  }
  if (!variable && !other) throw regex_error("no string matches the pattern within minLength/maxLength");
  if (!variable || other) {
    throw regex_error(
        "minLength/maxLength beside a pattern are supported when the pattern implies them or has one repeated "
        "character class to bound");
  }
  int64_t new_lo = std::max(variable->min, lo - fixed);
  int64_t new_hi = hi < 0 ? variable->max : (variable->max < 0 ? hi - fixed : std::min(variable->max, hi - fixed));
  if (new_hi >= 0 && new_hi < new_lo) throw regex_error("no string matches the pattern within minLength/maxLength");
  variable->min = new_lo;
  variable->max = new_hi;
}

// How the characters of a set are written inside a JSON string.
std::string emit_set(const ranges& set) {
  std::vector<std::string> alts;
  std::string cls;
  bool controls[0x20] = {};
  for (auto [lo, hi] : set) {
    // Plain characters: U+0020 and above, but " and \ (and the surrogates, which UTF-8 lacks).
    for (auto [a, b] : {std::pair<char32_t, char32_t>{0x20, 0x21}, {0x23, 0x5B}, {0x5D, utf8::kMaxCodepoint}}) {
      char32_t x = std::max(lo, a), y = std::min(hi, b);
      if (x > y) continue;
      if (x >= 0xD800 && y <= 0xDFFF) continue;
      cls += gbnf_class_char(x);
      if (y > x) {
        cls += '-';
        cls += gbnf_class_char(y);
      }
    }
    for (char32_t c = lo; c <= std::min<char32_t>(hi, 0x5C); ++c) {
      if (c == '"') alts.push_back(gbnf_literal("\\\""));
      if (c == '\\') alts.push_back(gbnf_literal("\\\\"));
      if (c < 0x20) controls[c] = true;
    }
  }
  // Control characters: \b \f \n \r \t, the others \u00XX (grouped by their high digit).
  const std::pair<char32_t, const char*> short_forms[] = {
      {'\b', "\\b"}, {'\f', "\\f"}, {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}};
  for (auto [c, form] : short_forms) {
    if (controls[c]) alts.push_back(gbnf_literal(form));
    controls[c] = false;
  }
  for (int high = 0; high < 2; ++high) {
    std::string digits;
    for (int low = 0; low < 16; ++low) {
      if (controls[high * 16 + low]) digits.push_back("0123456789ABCDEF"[low]);
    }
    if (!digits.empty()) alts.push_back(gbnf_literal("\\u00" + std::to_string(high)) + " [" + digits + "]");
  }
  if (!cls.empty()) alts.insert(alts.begin(), "[" + cls + "]");
  if (alts.empty()) throw regex_error("a character class that matches no character");
  if (alts.size() == 1) return alts[0];
  std::string out;
  for (const auto& a : alts) {
    out += out.empty() ? "( " : " | ";
    out += a;
  }
  return out + " )";
}

std::string emit(const node& n) {
  switch (n.k) {
    case node::kind::set:
      return emit_set(n.set);
    case node::kind::sequence: {
      if (n.kids.empty()) return "\"\"";
      std::string out = "(";
      for (const node& k : n.kids) {
        out += ' ';
        out += emit(k);
      }
      return out + " )";
    }
    case node::kind::alternation: {
      std::string out;
      for (const node& k : n.kids) {
        out += out.empty() ? "( " : " | ";
        out += emit(k);
      }
      return out + " )";
    }
    case node::kind::repeat: {
      if (n.max == 0) return "\"\"";
      std::string out = "( ";
      out += emit(n.kids[0]);
      out += " ){" + std::to_string(n.min) + ",";
      if (n.max >= 0) out += std::to_string(n.max);
      return out + "}";
    }
  }
  return "\"\"";
}

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, int64_t min_length, int64_t max_length) {
  node root = parser(pattern).parse();
  if (min_length > 0 || max_length >= 0) apply_lengths(root, min_length, max_length);
  return emit(root);
}

}  // namespace tandem::grammar
