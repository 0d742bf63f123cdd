#include "engine/chat/tool_call_grammar.h"

#include <boost/json.hpp>
#include <cctype>
#include <stdexcept>

#include "engine/grammar/json_schema.h"

namespace tandem {
namespace json = boost::json;
namespace {

// Renames rule `from` to `to` in GBNF text: identifiers outside string literals and
// character classes.
std::string rename_rule(const std::string& gbnf, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(gbnf.size() + 64);
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') {  // a literal or a class: copied as is, escapes included
      const char close = c == '"' ? '"' : ']';
      size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
      out.append(gbnf, i, j + 1 - i);
      i = j + 1;
    } else if (c == '#') {  // a comment, to the end of the line
      const size_t j = gbnf.find('\n', i);
      out.append(gbnf, i, j == std::string::npos ? std::string::npos : j - i);
      i = j == std::string::npos ? gbnf.size() : j;
    } else if (ident(c)) {
      size_t j = i;
      while (j < gbnf.size() && ident(gbnf[j])) ++j;
      const std::string_view word(gbnf.data() + i, j - i);
      out += word == from ? std::string(to) : std::string(word);
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// A GBNF string literal for text.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string tool_call_grammar(std::string_view tools_json, tool_call_parser::syntax syntax, std::string_view only) {
  const json::value tools = json::parse(tools_json);
  const char* args_key = syntax == tool_call_parser::syntax::llama3 ? "parameters" : "arguments";
  json::array calls;
  for (const auto& t : tools.as_array()) {
    const auto& fn = t.as_object().at("function").as_object();
    const std::string name(fn.at("name").as_string());
    if (!only.empty() && name != only) continue;
    json::value params = json::object{{"type", "object"}};
    if (const auto* p = fn.if_contains("parameters")) params = *p;
    calls.push_back(
        json::object{{"type", "object"},
                     {"properties", json::object{{"name", json::object{{"const", name}}}, {args_key, params}}},
                     {"required", json::array{"name", args_key}}});
  }
  if (calls.empty()) throw std::invalid_argument("tool_call_grammar: no tool named '" + std::string(only) + "'");
  const json::value schema = calls.size() == 1 ? calls[0] : json::value(json::object{{"anyOf", std::move(calls)}});
  const std::string call = rename_rule(grammar::json_schema_to_gbnf(json::serialize(schema)), "root", "tool-call");
  switch (syntax) {
    case tool_call_parser::syntax::hermes:
      return "root ::= " + literal("<tool_call>\n") + " tool-call " + literal("\n</tool_call>") + "\n" + call;
    case tool_call_parser::syntax::mistral:
      return "root ::= " + literal("[TOOL_CALLS][") + " tool-call " + literal("]") + "\n" + call;
    case tool_call_parser::syntax::llama3:
    case tool_call_parser::syntax::generic:
      break;
  }
  return "root ::= tool-call\n" + call;
}

}  // namespace tandem
