// Tokens -> program (ast.h), following jinja2's grammar and operator precedence:
//
//   cond:    or ('if' or ('else' cond)?)*
//   or/and/not, then compare (== != < <= > >= in, not in; chained)
//   math1 (+ -) > concat (~) > math2 (* / // %) > pow (**) > unary (- +)
//   primary, then postfix (.attr [item] [a:b:c] (call)), then filters (| f) and tests (is t)
//
// Throws syntax_error naming the line.
#pragma once

#include <string_view>

#include "engine/jinja/ast.h"
#include "engine/jinja/lexer.h"

namespace tandem::jinja {

program parse(std::string_view source, const lexer_options& opts = {});

}  // namespace tandem::jinja
