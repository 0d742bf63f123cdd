// Template source -> tokens, with jinja2's whitespace control as Hugging Face configures it
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off):
//
//   "  {%- if x -%}  "    '-' strips all whitespace on that side of the tag
//   "\n  {% if x %}\n"    lstrip_blocks drops the spaces before a block/comment tag that starts
//                         its line; trim_blocks drops the one newline after it
//   "{%+ if x %}"         '+' keeps the spaces before the tag
//
// Newlines are normalised to "\n" and one trailing newline of the source is dropped.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja {

// A template that does not parse; what() names the line ("line 3: ...").
class syntax_error : public std::runtime_error {
 public:
  syntax_error(int line, const std::string& what)
      : std::runtime_error("line " + std::to_string(line) + ": " + what), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

struct token {
  enum class kind {
    text,         // template data, whitespace control applied
    var_begin,    // {{
    var_end,      // }}
    block_begin,  // {%
    block_end,    // %}
    name,
    string,  // value: the literal's text with escapes resolved
    integer,
    number,
    op,  // value: the operator ("+", "//", "==", "(", ...)
    end,
  };
  kind type;
  std::string value;
  int line;
};

struct lexer_options {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

std::vector<token> tokenize(std::string_view source, const lexer_options& opts = {});

}  // namespace tandem::jinja
