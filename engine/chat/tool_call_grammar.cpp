#include "engine/chat/tool_call_grammar.h"

#include <boost/json.hpp>
#include <cctype>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema.h"

namespace tandem {
namespace json = boost::json;
namespace {

// GBNF text with every rule name `name` written as rename(name): identifiers outside
// string literals, character classes, repetition counts and comments.
template <typename F>
std::string rename_rules(const std::string& gbnf, F rename) {
  std::string out;
  out.reserve(gbnf.size() + 64);
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[' || c == '{') {  // a literal, a class or a count: copied as is
      const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
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
      out += rename(std::string_view(gbnf.data() + i, j - i));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string rename_root(const std::string& gbnf, std::string_view to) {
  return rename_rules(gbnf, [&](std::string_view w) { return std::string(w == "root" ? to : w); });
}

using grammar::gbnf_literal;

// The parameters' schema of each tool (all, or the one named `only`), by name.
std::vector<std::pair<std::string, json::value>> tool_schemas(std::string_view tools_json, std::string_view only) {
  const json::value tools = json::parse(tools_json);
  std::vector<std::pair<std::string, json::value>> out;
  for (const auto& t : tools.as_array()) {
    const auto& fn = t.as_object().at("function").as_object();
    std::string name(fn.at("name").as_string());
    if (!only.empty() && name != only) continue;
    json::value params = json::object{{"type", "object"}};
    if (const auto* p = fn.if_contains("parameters")) params = *p;
    out.emplace_back(std::move(name), std::move(params));
  }
  if (out.empty()) throw std::invalid_argument("tool_call_grammar: no tool named '" + std::string(only) + "'");
  return out;
}

// An optional analysis message before a harmony reply's forced message: its text is anything
// without "<|end|>" (one rule per state of matching it; every rule a tail call).
constexpr std::string_view kHarmonyAnalysis = R"(harmony-analysis ::= "<|channel|>analysis<|message|>" harmony-t0 "<|end|><|start|>assistant"
harmony-t0 ::= [^<]* ( "<" harmony-t1 )?
harmony-t1 ::= ( "|" harmony-t2 | "<" harmony-t1 | [^|<] harmony-t0 )?
harmony-t2 ::= ( "e" harmony-t3 | "<" harmony-t1 | [^e<] harmony-t0 )?
harmony-t3 ::= ( "n" harmony-t4 | "<" harmony-t1 | [^n<] harmony-t0 )?
harmony-t4 ::= ( "d" harmony-t5 | "<" harmony-t1 | [^d<] harmony-t0 )?
harmony-t5 ::= ( "|" harmony-t6 | "<" harmony-t1 | [^|<] harmony-t0 )?
harmony-t6 ::= ( "<" harmony-t1 | [^><] harmony-t0 )?
)";

// harmony: each function's own rules, prefixed `tool-N-`, behind its name.
std::string harmony_tool_call(const std::vector<std::pair<std::string, json::value>>& tools) {
  std::string root = "root ::= harmony-analysis? \"<|channel|>commentary to=functions.\" (";
  std::string rules;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = "tool-" + std::to_string(i) + "-";
    root += (i == 0 ? " " : " | ") + prefix + "call";
    rules += prefix + "call ::= " + gbnf_literal(tools[i].first + " <|constrain|>json<|message|>") + " " + prefix +
             "root\n";
    rules += rename_rules(grammar::json_schema_to_gbnf(json::serialize(tools[i].second)),
                          [&](std::string_view w) { return prefix + std::string(w); });
  }
  return root + " )\n" + rules + std::string(kHarmonyAnalysis);
}

}  // namespace

std::string tool_call_grammar(std::string_view tools_json, tool_call_parser::syntax syntax, std::string_view only) {
  const auto tools = tool_schemas(tools_json, only);
  if (syntax == tool_call_parser::syntax::harmony) return harmony_tool_call(tools);
  const char* args_key = syntax == tool_call_parser::syntax::llama3 ? "parameters" : "arguments";
  json::array calls;
  for (const auto& [name, params] : tools) {
    calls.push_back(
        json::object{{"type", "object"},
                     {"properties", json::object{{"name", json::object{{"const", name}}}, {args_key, params}}},
                     {"required", json::array{"name", args_key}}});
  }
  const json::value schema = calls.size() == 1 ? calls[0] : json::value(json::object{{"anyOf", std::move(calls)}});
  const std::string call = rename_root(grammar::json_schema_to_gbnf(json::serialize(schema)), "tool-call");
  switch (syntax) {
    case tool_call_parser::syntax::hermes:
      return "root ::= " + gbnf_literal("<tool_call>\n") + " tool-call " + gbnf_literal("\n</tool_call>") + "\n" + call;
    case tool_call_parser::syntax::mistral:
      return "root ::= " + gbnf_literal("[TOOL_CALLS][") + " tool-call " + gbnf_literal("]") + "\n" + call;
    case tool_call_parser::syntax::llama3:
    case tool_call_parser::syntax::generic:
    case tool_call_parser::syntax::harmony:
      break;
  }
  return "root ::= tool-call\n" + call;
}

std::string harmony_final_grammar(const std::string& body_gbnf) {
  return "root ::= harmony-analysis? \"<|channel|>final\" \" <|constrain|>json\"? \"<|message|>\" final-root\n" +
         rename_rules(body_gbnf, [](std::string_view w) { return "final-" + std::string(w); }) +
         std::string(kHarmonyAnalysis);
}

}  // namespace tandem
