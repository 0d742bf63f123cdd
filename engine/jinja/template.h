// A Jinja template compiled once and rendered many times: the interpreter for the subset of
// Jinja2 that chat templates use, rendering exactly what Python's jinja2 renders in the
// environment Hugging Face transformers sets up (trim_blocks, lstrip_blocks, loop controls,
// the generation tag, raise_exception, strftime_now, tojson as json.dumps).
//
//   auto t = jinja::compiled_template::compile(source);         // throws syntax_error (line)
//   auto out = t.render({{"messages", msgs}, {"add_generation_prompt", true}});
//   out.text     the rendered text
//   out.content  byte ranges that came from caller strings (value::content), the rest is
//                template text
//
// A compiled template is immutable: render() may run on many threads at once.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/jinja/lexer.h"
#include "engine/jinja/value.h"

namespace tandem::jinja {

struct program;

struct render_options {
  // strftime_now's clock (seconds since the epoch, formatted as UTC); the current time when absent.
  std::optional<std::time_t> now;
};

class compiled_template {
 public:
  // Throws syntax_error ("line N: ...") when `source` does not parse.
  static compiled_template compile(std::string_view source, const lexer_options& opts = {});

  // Throws render_error when the template fails on these variables (raise_exception, an
  // undefined value used, a type error, ...).
  string_data render(const std::vector<std::pair<std::string, value>>& variables,
                     const render_options& opts = {}) const;

  // Whether the template refers to a variable or function called `name`.
  bool mentions(std::string_view name) const;

 private:
  std::shared_ptr<const program> program_;
};

}  // namespace tandem::jinja
