// A grammar that forces a reply to be one tool call (tool_choice "required" or a named
// function), in the syntax the template's model writes, so that the tool-call parser reads
// the forced output like any other:
//
//   hermes   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   llama3   {"name": "f", "parameters": {...}}
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}]
//   generic  {"name": "f", "arguments": {...}}
//   harmony  [<|channel|>analysis<|message|>...<|end|><|start|>assistant]
//            <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}
//
// The call object is a JSON Schema (anyOf over the allowed functions, each with its name as a
// const and its parameters' schema) turned into GBNF by engine/grammar/json_schema.h; the
// markers wrap its root rule. harmony names the function in the header, so there each
// function's parameters schema is its own set of rules behind its name. A harmony reply may
// think first: one analysis message (any text without <|end|>) may precede the forced one.
#pragma once

#include <string>
#include <string_view>

#include "engine/chat/tool_call_parser.h"

namespace tandem {

// tools_json: OpenAI's "tools" array. only: the one function allowed ("" = any of them).
// Throws grammar::schema_error for a parameters schema the grammar engine refuses, and
// std::invalid_argument when `only` names no tool.
std::string tool_call_grammar(std::string_view tools_json, tool_call_parser::syntax syntax, std::string_view only = "");

// A harmony reply whose final message is what `body_gbnf` (its root rule) allows, e.g. a
// response_format's JSON:
//   [analysis message] <|channel|>final[ <|constrain|>json]<|message|>BODY
std::string harmony_final_grammar(const std::string& body_gbnf);

}  // namespace tandem
