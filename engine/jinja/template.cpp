#include "engine/jinja/template.h"

#include <algorithm>

#include "engine/jinja/evaluator.h"
#include "engine/jinja/parser.h"

namespace tandem::jinja {

compiled_template compiled_template::compile(std::string_view source, const lexer_options& opts) {
  compiled_template t;
  t.program_ = std::make_shared<const program>(parse(source, opts));
  return t;
}

string_data compiled_template::render(const std::vector<std::pair<std::string, value>>& variables,
                                      const render_options& opts) const {
  evaluator ev(*program_, opts.now);
  return ev.render(variables);
}

bool compiled_template::mentions(std::string_view name) const {
  return std::find(program_->names.begin(), program_->names.end(), name) != program_->names.end();
}

}  // namespace tandem::jinja
