// A grammar that forces a reply to be one tool call (tool_choice "required" or a named
// function), in the syntax the template's model writes, so that the tool-call parser reads
// the forced output like any other:
//
//   hermes   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   llama3   {"name": "f", "parameters": {...}}
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}]
//   generic  {"name": "f", "arguments": {...}}
//
// The call object is a JSON Schema (anyOf over the allowed functions, each with its name as a
// const and its parameters' schema) turned into GBNF by engine/grammar/json_schema.h; the
// markers wrap its root rule.
#pragma once

#include <string>
#include <string_view>

#include "engine/chat/tool_call_parser.h"

namespace tandem {

// tools_json: OpenAI's "tools" array. only: the one function allowed ("" = any of them).
// Throws grammar::schema_error for a parameters schema the grammar engine refuses, and
// std::invalid_argument when `only` names no tool.
std::string tool_call_grammar(std::string_view tools_json, tool_call_parser::syntax syntax, std::string_view only = "");

}  // namespace tandem
