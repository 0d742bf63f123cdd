#include "engine/jinja/lexer.h"

#include "engine/jinja/escapes.h"
#include "engine/jinja/py_string.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Length of the Python whitespace code point at `i` (0 when there is none).
size_t space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const auto d = utf8::decode_lenient(s, i);
  return py::is_space(d.cp) ? d.length : 0;
}

std::string rstrip_space(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (n == 0) {
      i += utf8::decode_lenient(s, i).length;
      end = i;
    } else {
      i += n;
    }
  }
  return std::string(s.substr(0, end));
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    if (const char b = escapes::control_byte(c)) {
      out.push_back(b);
      continue;
    }
    switch (c) {
      case '\n':
        break;  // a line continuation
      case 'a':
        out.push_back('\a');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\\':
      case '\'':
      case '"':
        out.push_back(c);
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        const auto v = escapes::hex_digits(s, i + 1, n);
        if (!v) throw std::invalid_argument("truncated \\" + std::string(1, c) + " escape");
        utf8::append(out, *v);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = 0;
          size_t n = 0;
          while (n < 3 && i + n < s.size() && s[i + n] >= '0' && s[i + n] <= '7') cp = cp * 8 + (s[i + n++] - '0');
          utf8::append(out, cp);
          i += n - 1;
        } else {
          out.push_back('\\');
          out.push_back(c);
        }
    }
  }
  return out;
}

class lexer {
 public:
  lexer(std::string_view source, const lexer_options& opts) : opts_(opts) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<token> run() {
    while (pos_ < src_.size()) data();
    emit(token::kind::end, "");
    return std::move(out_);
  }

 private:
  void emit(token::kind k, std::string v) { out_.push_back({k, std::move(v), line_}); }
  void advance_to(size_t p) {
    for (size_t i = pos_; i < p; ++i) line_ += src_[i] == '\n';
    pos_ = p;
  }
  void skip_space_after_tag() {
    size_t p = pos_;
    while (size_t n = space_at(src_, p)) p += n;
    advance_to(p);
  }
  // After a block or comment tag without '-' or '+': trim_blocks drops one newline.
  void trim_newline() {
    if (opts_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') advance_to(pos_ + 1);
  }
  [[noreturn]] void fail(const std::string& why) const { throw syntax_error(line_, why); }

  void data() {
    const size_t at = src_.find('{', pos_);
    size_t open = std::string::npos;
    for (size_t p = at; p != std::string::npos && p + 1 < src_.size(); p = src_.find('{', p + 1)) {
      const char n = src_[p + 1];
      if (n == '{' || n == '%' || n == '#') {
        open = p;
        break;
      }
    }
    if (open == std::string::npos) {
      emit_text(src_.substr(pos_));
      advance_to(src_.size());
      return;
    }
    const char kind = src_[open + 1];
    const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
    std::string text = src_.substr(pos_, open - pos_);
    if (sign == '-') {
      text = rstrip_space(text);
    } else if (sign != '+' && opts_.lstrip_blocks && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) text.erase(l_pos);
    }
    emit_text(text);
    advance_to(open + 2 + (sign == '-' || sign == '+' ? 1 : 0));
    if (kind == '#') {
      comment();
    } else if (kind == '%' && raw_block()) {
      // handled
    } else {
      tag(kind == '%');
    }
  }

  void emit_text(std::string text) {
    if (!text.empty()) emit(token::kind::text, std::move(text));
  }

  void comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail("missing end of comment tag");
    const char before = close > pos_ ? src_[close - 1] : '\0';
    advance_to(close + 2);
    if (before == '-') {
      skip_space_after_tag();
    } else if (before != '+') {
      trim_newline();
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  // {% raw %}...{% endraw %}: the text between, verbatim.
  bool raw_block() {
    size_t p = pos_;
    while (size_t n = space_at(src_, p)) p += n;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    while (size_t n = space_at(src_, p)) p += n;
    bool strip_after = false;
    if (src_.compare(p, 3, "-%}") == 0) {
      strip_after = true;
      p += 3;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    advance_to(p);
    if (strip_after) skip_space_after_tag();
    // The body runs to the first {% endraw %} (with optional whitespace control).
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      const char sign = r < src_.size() ? src_[r] : '\0';
      if (sign == '-' || sign == '+') ++r;
      while (size_t n = space_at(src_, r)) r += n;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (size_t n = space_at(src_, r)) r += n;
      const char end_sign = src_.compare(r, 1, "-") == 0 ? '-' : src_.compare(r, 1, "+") == 0 ? '+' : '\0';
      if (end_sign != '\0') ++r;
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, q - pos_);
      if (sign == '-') body = rstrip_space(body);
      emit_text(body);
      advance_to(r + 2);
      if (end_sign == '-') {
        skip_space_after_tag();
      } else if (end_sign != '+') {
        trim_newline();
      }
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return true;
    }
    fail("missing end of raw directive");
  }

  void tag(bool block) {
    emit(block ? token::kind::block_begin : token::kind::var_begin, "");
    int depth = 0;  // open brackets: the end delimiter does not count inside them
    for (;;) {
      if (pos_ >= src_.size()) fail(block ? "unexpected end of template, expected '%}'" : "expected '}}'");
      if (depth == 0 && end_of_tag(block)) return;
      if (size_t n = space_at(src_, pos_)) {
        advance_to(pos_ + n);
        continue;
      }
      const char c = src_[pos_];
      if (is_digit(c)) {
        number();
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        emit(token::kind::name, src_.substr(pos_, e - pos_));
        advance_to(e);
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (auto t : kTwo) {
          if (src_.compare(pos_, 2, t) == 0) op = t;
        }
        if (op.empty()) {
          if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
            fail(std::string("unexpected char '") + c + "'");
          }
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail("unexpected '" + op + "'");
          --depth;
        }
        emit(token::kind::op, op);
        advance_to(pos_ + op.size());
      }
    }
  }

  bool end_of_tag(bool block) {
    const std::string_view close = block ? "%}" : "}}";
    if (src_.compare(pos_, 2, close) == 0) {
      emit(block ? token::kind::block_end : token::kind::var_end, "");
      advance_to(pos_ + 2);
      if (block) trim_newline();
    } else if (src_.compare(pos_ + 1, 2, close) == 0 && src_[pos_] == '-') {
      emit(block ? token::kind::block_end : token::kind::var_end, "");
      advance_to(pos_ + 3);
      skip_space_after_tag();
    } else if (block && src_.compare(pos_ + 1, 2, close) == 0 && src_[pos_] == '+') {
      emit(token::kind::block_end, "");
      advance_to(pos_ + 3);
    } else {
      return false;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    return true;
  }

  void number() {
    size_t e = pos_;
    const auto digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1]))))
        ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        is_float = true;
        e = x;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    emit(is_float ? token::kind::number : token::kind::integer, text);
    advance_to(e);
  }

  void string_literal(char quote) {
    size_t e = pos_ + 1;
    while (e < src_.size() && src_[e] != quote) e += src_[e] == '\\' ? 2 : 1;
    if (e >= src_.size()) fail("unterminated string");
    try {
      emit(token::kind::string, unescape(std::string_view(src_).substr(pos_ + 1, e - pos_ - 1)));
    } catch (const std::invalid_argument& ex) {
      fail(ex.what());
    }
    advance_to(e + 1);
  }

  lexer_options opts_;
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<token> out_;
};

}  // namespace

std::vector<token> tokenize(std::string_view source, const lexer_options& opts) { return lexer(source, opts).run(); }

}  // namespace tandem::jinja
