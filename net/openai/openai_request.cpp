#include "net/openai/openai_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>

#include "net/request_fields.h"

namespace tandem::net {
namespace json = boost::json;

const char* error_type_for(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 413:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(const api_error& e) {
  json::object err;
  err["message"] = e.what();
  err["type"] = error_type_for(e.status);
  err["param"] = e.param.empty() ? json::value(nullptr) : json::value(e.param);
  err["code"] = e.code.empty() ? json::value(e.status) : json::value(e.code);
  json::object body;
  body["error"] = std::move(err);
  return json::serialize(body);
}

json::value parse_json_body(std::string_view body) {
  boost::system::error_code ec;
  json::parse_options opt;
  opt.max_depth = 64;
  json::value v = json::parse(body, ec, {}, opt);
  if (ec) throw api_error(400, "the request body is not valid JSON: " + ec.message());
  if (!v.is_object()) throw api_error(400, "the request body must be a JSON object");
  return v;
}

namespace {}  // namespace

std::string format_number(double x) {
  if (x == 0) return "0";  // also -0
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest text that reads back as x
  return std::string(buf, r.ptr);
}

namespace {

double number(const json::object& o, std::string_view name, double fallback, double lo, double hi) {
  const json::value* v = field(o, name);
  if (!v) return fallback;
  double x;
  if (v->is_double())
    x = v->get_double();
  else if (v->is_int64())
    x = static_cast<double>(v->get_int64());
  else if (v->is_uint64())
    x = static_cast<double>(v->get_uint64());
  else
    bad(std::string(name), "must be a number");
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(std::string(name), "must be between " + format_number(lo) + " and " + format_number(hi) + " (got " +
                               (v->is_double() ? format_number(x) : json::serialize(*v)) + ")");
  }
  return x;
}

int64_t integer(const json::object& o, std::string_view name, int64_t fallback, int64_t lo, int64_t hi) {
  const json::value* v = field(o, name);
  if (!v) return fallback;
  int64_t x;
  if (v->is_int64())
    x = v->get_int64();
  else if (v->is_uint64() && v->get_uint64() <= static_cast<uint64_t>(INT64_MAX))
    x = static_cast<int64_t>(v->get_uint64());
  else if (v->is_double() && std::floor(v->get_double()) == v->get_double() && std::fabs(v->get_double()) < 9e15)
    x = static_cast<int64_t>(v->get_double());
  else
    bad(std::string(name), "must be an integer");
  if (x < lo || x > hi) {
    bad(std::string(name),
        "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + std::to_string(x) + ")");
  }
  return x;
}

bool boolean(const json::object& o, std::string_view name, bool fallback) {
  const json::value* v = field(o, name);
  if (!v) return fallback;
  if (!v->is_bool()) bad(std::string(name), "must be true or false");
  return v->get_bool();
}

std::string string(const json::object& o, std::string_view name) {
  const json::value* v = field(o, name);
  if (!v) return {};
  if (!v->is_string()) bad(std::string(name), "must be a string");
  return std::string(v->get_string());
}

// A fresh marker for a request's images: random, so no text a client types is taken for one.
std::string new_media_marker() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[48];
  std::snprintf(buf, sizeof buf, "<__image_%016llx__>", static_cast<unsigned long long>(rng()));
  return buf;
}

// An image_url part: {"image_url": {"url": ..., "detail": ...}} (or the URL as a string).
// Only data: URIs: the server fetches nothing. The image itself is decoded off this thread.
void add_image(const json::object& p, const std::string& at, generate_request& gen) {
  const json::value* iu = field(p, "image_url");
  if (!iu) bad(at + ".image_url", "is required");
  std::string url;
  if (iu->is_string()) {
    url = std::string(iu->get_string());
  } else if (iu->is_object()) {
    url = string(iu->get_object(), "url");
  } else {
    bad(at + ".image_url", "must be an object with a url");
  }
  if (url.starts_with("http://") || url.starts_with("https://")) {
    bad(at + ".image_url.url",
        "this server fetches no URLs: send the image inline as a data: URI (data:image/png;base64,...)");
  }
  if (!url.starts_with("data:")) bad(at + ".image_url.url", "must be a data: URI (data:image/png;base64,...)");
  if (gen.media_marker.empty()) gen.media_marker = new_media_marker();
  gen.images.push_back(std::move(url));
  gen.image_parts.push_back(at);
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts and, in a
// user message, {"type": "image_url", ...} parts (each leaves the request's media marker).
std::string message_content(const json::value& v, const std::string& where, generate_request& gen,
                            bool images_allowed) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_null()) return {};
  if (!v.is_array()) bad(where, "must be a string or a list of text parts");
  std::string out;
  size_t j = 0;
  for (const auto& part : v.get_array()) {
    const std::string at = where + "[" + std::to_string(j++) + "]";
    if (!part.is_object()) bad(where, "parts must be objects");
    const auto& p = part.get_object();
    const std::string type = string(p, "type");
    if (type == "image_url" && images_allowed) {
      add_image(p, at, gen);
      out += gen.media_marker;
      continue;
    }
    if (type == "image_url") bad(at + ".type", "images belong in user messages");
    if (type != "text") bad(where, "supports only parts of type 'text' and 'image_url'");
    out += string(p, "text");
  }
  return out;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
std::vector<tool_call> parse_tool_calls_field(const json::value& v, const std::string& where) {
  if (!v.is_array()) bad(where, "must be a list of tool calls");
  std::vector<tool_call> out;
  size_t i = 0;
  for (const auto& c : v.get_array()) {
    const std::string at = where + "[" + std::to_string(i++) + "]";
    if (!c.is_object()) bad(at, "must be an object");
    const auto& co = c.get_object();
    const json::value* fn = field(co, "function");
    if (!fn || !fn->is_object()) bad(at + ".function", "must be an object with the function's name and arguments");
    tool_call t;
    t.id = string(co, "id");
    t.name = string(fn->get_object(), "name");
    if (t.name.empty()) bad(at + ".function.name", "is required");
    const json::value* args = field(fn->get_object(), "arguments");
    if (!args) {
      t.arguments = "{}";
    } else if (args->is_string()) {
      t.arguments = std::string(args->get_string());
    } else if (args->is_object()) {
      t.arguments = json::serialize(*args);
    } else {
      bad(at + ".function.arguments", "must be a JSON string");
    }
    out.push_back(std::move(t));
  }
  return out;
}

void parse_messages(const json::object& o, generate_request& gen) {
  const json::value* v = field(o, "messages");
  if (!v) bad("messages", "is required");
  if (!v->is_array() || v->get_array().empty()) bad("messages", "must be a non-empty list");
  size_t i = 0;
  for (const auto& m : v->get_array()) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    if (!m.is_object()) bad(where, "must be an object");
    const auto& mo = m.get_object();
    chat_turn t;
    const json::value* role = field(mo, "role");
    if (!role || !role->is_string()) bad(where + ".role", "must be a string");
    t.role = std::string(role->get_string());
    if (t.role == "developer") t.role = "system";
    if (t.role != "system" && t.role != "user" && t.role != "assistant" && t.role != "tool") {
      bad(where + ".role", "must be 'system', 'user', 'assistant' or 'tool' (got '" + t.role + "')");
    }
    if (t.role == "assistant") {
      if (const json::value* calls = field(mo, "tool_calls"))
        t.tool_calls = parse_tool_calls_field(*calls, where + ".tool_calls");
      t.reasoning_content = string(mo, "reasoning_content");
    }
    if (t.role == "tool") {
      t.tool_call_id = string(mo, "tool_call_id");
      if (t.tool_call_id.empty()) bad(where + ".tool_call_id", "is required for a tool message");
      t.name = string(mo, "name");
    }
    const auto c = mo.find("content");
    // An assistant turn that only calls tools may have "content": null or none.
    if (c == mo.end() && t.tool_calls.empty()) bad(where + ".content", "is required");
    t.content_is_null = c == mo.end() || c->value().is_null();
    if (t.content_is_null && t.tool_calls.empty() && t.role != "assistant") bad(where + ".content", "is required");
    if (c != mo.end()) t.content = message_content(c->value(), where + ".content", gen, t.role == "user");
    gen.messages.push_back(std::move(t));
  }
}

// One prompt: a string, or token ids (an array of integers, or one such array in a list, as
// lm-evaluation-harness sends it), each a token of the model's vocabulary.
void parse_prompt(const json::object& o, const api_limits& limits, generate_request& gen) {
  const json::value* v = field(o, "prompt");
  if (!v) bad("prompt", "is required");
  constexpr const char* kShapes = "must be a string or token ids (one prompt per request)";
  if (v->is_string()) {
    gen.prompt = std::string(v->get_string());
    return;
  }
  if (!v->is_array() || v->get_array().empty()) bad("prompt", kShapes);
  const auto& a = v->get_array();
  if (a.size() == 1 && a[0].is_string()) {
    gen.prompt = std::string(a[0].get_string());
    return;
  }
  if (a.size() > 1 && (a[0].is_array() || a[0].is_string())) {
    bad("prompt", "holds " + std::to_string(a.size()) + " prompts; this server takes one prompt per request");
  }
  const bool nested = a.size() == 1 && a[0].is_array();
  const json::array& ids = nested ? a[0].get_array() : a;
  if (ids.empty()) bad("prompt", kShapes);
  if (ids.size() >= std::max<size_t>(limits.max_model_len, 1)) {
    bad("prompt", "has " + std::to_string(ids.size()) + " tokens; this model's context is " +
                      std::to_string(limits.max_model_len) + " tokens (prompt and completion together)");
  }
  gen.prompt_tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string where = std::string(nested ? "prompt[0][" : "prompt[") + std::to_string(i) + "]";
    if (!ids[i].is_int64() && !ids[i].is_uint64()) bad(where, "must be a token id (an integer)");
    const int64_t id = ids[i].is_int64() ? ids[i].get_int64() : -1;
    if (id < 0 || static_cast<uint64_t>(id) >= limits.vocab_size) {
      bad(where, "is not a token id of this model (0 to " + std::to_string(limits.vocab_size - 1) + ")");
    }
    gen.prompt_tokens.push_back(static_cast<int32_t>(id));
  }
}

void parse_stop(const json::object& o, generate_request& gen) {
  const json::value* v = field(o, "stop");
  if (!v) return;
  if (v->is_string()) {
    if (!v->get_string().empty()) gen.stop.emplace_back(v->get_string());
    return;
  }
  if (!v->is_array()) bad("stop", "must be a string or a list of strings");
  if (v->get_array().size() > 16) bad("stop", "may hold at most 16 strings");
  for (const auto& s : v->get_array()) {
    if (!s.is_string()) bad("stop", "must be a string or a list of strings");
    if (!s.get_string().empty()) gen.stop.emplace_back(s.get_string());
  }
}

void parse_logit_bias(const json::object& o, const api_limits& limits, sampling_options& s) {
  const json::value* v = field(o, "logit_bias");
  if (!v) return;
  if (!v->is_object()) bad("logit_bias", "must be an object mapping token ids to numbers");
  for (const auto& kv : v->get_object()) {
    const std::string key(kv.key());
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || static_cast<size_t>(id) >= limits.vocab_size) {
      bad("logit_bias", "has key '" + key + "', which is not a token id below " + std::to_string(limits.vocab_size));
    }
    const json::object one{{"logit_bias", kv.value()}};
    s.logit_bias_ids.push_back(static_cast<int32_t>(id));
    s.logit_bias_values.push_back(static_cast<float>(number(one, "logit_bias", 0, -100, 100)));
  }
}

void parse_stop_token_ids(const json::object& o, const api_limits& limits, generate_request& gen) {
  const json::value* v = field(o, "stop_token_ids");
  if (!v) return;
  if (!v->is_array()) bad("stop_token_ids", "must be a list of token ids");
  for (const auto& t : v->get_array()) {
    const json::object one{{"stop_token_ids", t}};
    gen.stop_token_ids.push_back(
        static_cast<int32_t>(integer(one, "stop_token_ids", 0, 0, static_cast<int64_t>(limits.vocab_size) - 1)));
  }
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}], and
// tool_choice / parallel_tool_calls. The list goes to the template as JSON.
void parse_tools(const json::object& o, api_request& r) {
  const json::value* tools = field(o, "tools");
  const json::value* choice = field(o, "tool_choice");
  if (tools) {
    if (!tools->is_array()) bad("tools", "must be a list of tools");
    if (tools->get_array().size() > 128) bad("tools", "may hold at most 128 tools");
    size_t i = 0;
    for (const auto& t : tools->get_array()) {
      const std::string at = "tools[" + std::to_string(i++) + "]";
      if (!t.is_object()) bad(at, "must be an object");
      const auto& to = t.get_object();
      if (string(to, "type") != "function") bad(at + ".type", "must be 'function'");
      const json::value* fn = field(to, "function");
      if (!fn || !fn->is_object()) bad(at + ".function", "must be an object");
      const auto& fo = fn->get_object();
      const std::string name = string(fo, "name");
      const bool name_ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
      });
      if (!name_ok) bad(at + ".function.name", "must be 1-64 letters, digits, '_' or '-'");
      if (std::find(r.tool_names.begin(), r.tool_names.end(), name) != r.tool_names.end()) {
        bad(at + ".function.name", "'" + name + "' is given twice");
      }
      if (const json::value* p = field(fo, "parameters"); p && !p->is_object()) {
        bad(at + ".function.parameters", "must be a JSON Schema object");
      }
      r.tool_names.push_back(name);
    }
    if (!r.tool_names.empty()) r.gen.tools_json = json::serialize(*tools);
  }
  r.tool_choice = r.tool_names.empty() ? tool_choice_mode::none : tool_choice_mode::automatic;
  if (choice) {
    if (choice->is_string()) {
      const std::string c(choice->get_string());
      if (c == "none") {
        r.tool_choice = tool_choice_mode::none;
      } else if (c == "auto") {
        r.tool_choice = tool_choice_mode::automatic;
      } else if (c == "required") {
        r.tool_choice = tool_choice_mode::required;
      } else {
        bad("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", ...} (got '" + c + "')");
      }
    } else if (choice->is_object()) {
      const json::value* fn = field(choice->get_object(), "function");
      r.tool_choice_name = fn && fn->is_object() ? string(fn->get_object(), "name") : "";
      if (r.tool_choice_name.empty())
        bad("tool_choice", "must name the function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
      if (std::find(r.tool_names.begin(), r.tool_names.end(), r.tool_choice_name) == r.tool_names.end()) {
        bad("tool_choice", "names '" + r.tool_choice_name + "', which is not among the tools");
      }
      r.tool_choice = tool_choice_mode::named;
    } else {
      bad("tool_choice", "must be a string or an object");
    }
    if (r.tool_choice != tool_choice_mode::none && r.tool_names.empty()) bad("tool_choice", "needs tools");
  }
  r.parallel_tool_calls = boolean(o, "parallel_tool_calls", true);
  r.gen.parse_tool_calls = r.tool_choice != tool_choice_mode::none;
  // "none": the template does not see the tools either, so the model is not told of them.
  if (r.tool_choice == tool_choice_mode::none) r.gen.tools_json.clear();
}

void reject_unsupported(const json::object& o) {
  for (const char* name : {"functions", "function_call", "suffix"}) {
    if (field(o, name)) bad(name, "is not supported by this server");
  }
  if (integer(o, "best_of", 1, 1, 1) != 1) bad("best_of", "is not supported");
}

// llama-server's "lora": [{"id": N, "scale": S}, ...], the adapters' ids and scales (admission
// checks the ids against the server's adapters: engine/lora/adapter_choice.h).
void parse_lora(const json::object& o, generate_request& gen) {
  const json::value* v = field(o, "lora");
  if (v == nullptr) return;
  if (!v->is_array()) bad("lora", "must be a list of {\"id\": N, \"scale\": S} objects");
  const auto& a = v->get_array();
  if (a.size() > 256) bad("lora", "lists more than 256 adapters");
  for (const auto& e : a) {
    if (!e.is_object()) bad("lora", "must be a list of {\"id\": N, \"scale\": S} objects");
    const auto& eo = e.get_object();
    if (!eo.contains("id")) bad("lora", "an entry has no id");
    gen.lora_ids.push_back(static_cast<int32_t>(integer(eo, "id", 0, 0, 1 << 20)));
    gen.lora_scales.push_back(static_cast<float>(number(eo, "scale", 0, -100, 100)));
  }
}

// response_format {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict"}} and Tandem's (llama-server's) "grammar": a GBNF grammar. The grammar
// is compiled when the request starts (off the network thread); a bad one is a 400 then.
void parse_output_grammar(const json::object& o, generate_request& gen) {
  if (const json::value* rf = field(o, "response_format")) {
    if (!rf->is_object()) bad("response_format", "must be an object");
    const auto& ro = rf->get_object();
    const std::string type = string(ro, "type");
    if (type == "json_object") {
      gen.grammar.type = output_grammar::kind::json_object;
    } else if (type == "json_schema") {
      const json::value* js = field(ro, "json_schema");
      if (!js || !js->is_object()) bad("response_format.json_schema", "must be an object with the schema");
      const json::value* schema = field(js->get_object(), "schema");
      if (!schema || !(schema->is_object() || schema->is_bool())) {
        bad("response_format.json_schema.schema", "must be a JSON Schema object");
      }
      gen.grammar = {output_grammar::kind::json_schema, json::serialize(*schema)};
    } else if (type != "text") {
      bad("response_format.type", "must be 'text', 'json_object' or 'json_schema' (got '" + type + "')");
    }
  }
  if (const json::value* g = field(o, "grammar")) {
    if (!g->is_string() || g->get_string().empty()) bad("grammar", "must be a GBNF grammar (a non-empty string)");
    if (gen.grammar.type != output_grammar::kind::none) bad("grammar", "cannot be given with a JSON response_format");
    gen.grammar = {output_grammar::kind::gbnf, std::string(g->get_string())};
  }
}

// chat_template_kwargs, and OpenAI's reasoning_effort as the template variable of that name
// (gpt-oss's template reads it; it wins over a kwarg of the same name). "none" turns thinking
// off instead (enable_thinking false, unless the kwargs say otherwise), as llama-server does.
void parse_template_kwargs(const json::object& o, generate_request& gen) {
  json::object kwargs;
  if (const json::value* kw = field(o, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "must be an object");
    kwargs = kw->get_object();
  }
  if (field(o, "reasoning_effort")) {
    const std::string effort = string(o, "reasoning_effort");
    if (effort == "none") {
      kwargs.erase("reasoning_effort");
      if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
    } else if (effort == "minimal" || effort == "low" || effort == "medium" || effort == "high") {
      kwargs["reasoning_effort"] = effort;
    } else {
      bad("reasoning_effort", "must be 'none', 'minimal', 'low', 'medium' or 'high' (got '" + effort + "')");
    }
  }
  if (!kwargs.empty() || field(o, "chat_template_kwargs")) gen.chat_template_kwargs_json = json::serialize(kwargs);
}

}  // namespace

api_request parse_api_request(const json::value& body, api_kind kind, const api_limits& limits) {
  if (!body.is_object()) throw api_error(400, "the request body must be a JSON object");
  const auto& o = body.get_object();
  api_request r;
  r.kind = kind;
  r.model = string(o, "model");
  r.user = string(o, "user");
  reject_unsupported(o);
  auto& gen = r.gen;
  gen.model = r.model;
  gen.session = o.contains("session_id") ? string(o, "session_id") : r.user;
  if (gen.session.size() > 256) bad(o.contains("session_id") ? "session_id" : "user", "must be at most 256 bytes");
  parse_lora(o, gen);
  if (kind == api_kind::chat) {
    parse_messages(o, gen);
    parse_tools(o, r);
    parse_output_grammar(o, gen);
    if (r.tool_choice == tool_choice_mode::required || r.tool_choice == tool_choice_mode::named) {
      // The reply is forced to be one call (of the named function), in the template's syntax.
      if (gen.grammar.type != output_grammar::kind::none) {
        bad("tool_choice", "'required' or a named function cannot be combined with response_format or grammar");
      }
      gen.grammar = {output_grammar::kind::tool_call, r.tool_choice_name};
    }
    parse_template_kwargs(o, gen);
    gen.parse_reasoning = limits.parse_reasoning;
    gen.tool_call_parser = limits.tool_call_parser;
    gen.thinking_token_budget =
        static_cast<uint32_t>(integer(o, "thinking_token_budget", 0, 0, std::max<int64_t>(limits.max_model_len, 1)));
  } else {
    if (field(o, "tools") || field(o, "tool_choice"))
      bad(field(o, "tools") ? "tools" : "tool_choice", "is for chat completions");
    parse_prompt(o, limits, gen);
    parse_output_grammar(o, gen);
    gen.prompt_special_tokens = limits.prompt_special_tokens;
  }

  // Completions' echo: the reply's text (and logprobs) begin with the prompt's; with echo a
  // request may ask for no new tokens at all (max_tokens 0: the prompt is only scored).
  if (field(o, "echo") && kind != api_kind::completion) bad("echo", "is for /v1/completions");
  r.echo = boolean(o, "echo", false);
  const int64_t max_len = limits.max_model_len;
  const int64_t fallback = kind == api_kind::chat ? max_len : 16;
  const int64_t least = r.echo ? 0 : 1;
  int64_t max_tokens = integer(o, "max_tokens", fallback, least, max_len);
  max_tokens = integer(o, "max_completion_tokens", max_tokens, least, max_len);
  gen.max_tokens = static_cast<uint32_t>(max_tokens);
  r.n = static_cast<uint32_t>(integer(o, "n", 1, 1, limits.max_n));
  r.stream = boolean(o, "stream", false);
  if (const json::value* so = field(o, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    if (!r.stream) bad("stream_options", "is allowed only with stream: true");
    r.include_usage = boolean(so->get_object(), "include_usage", false);
  }
  parse_stop(o, gen);
  parse_stop_token_ids(o, limits, gen);
  gen.ignore_eos = boolean(o, "ignore_eos", false);
  // Tandem's extension: false keeps this request out of drafting when the server speculates
  // (--speculative); its output is the same either way, only its speed differs.
  gen.speculative = boolean(o, "speculative", true);
  // vLLM's priority (lower runs first; admission applies the tenant's) and a time-to-first-
  // token target in ms (the x-slo-ttft-ms header's, which wins when both are given).
  gen.priority = static_cast<int32_t>(integer(o, "priority", 0, -1000000, 1000000));
  gen.slo_ttft_ms = number(o, "slo_ttft_ms", 0.0, 0.0, 86'400'000.0);

  auto& s = gen.sampling;
  s.temperature = static_cast<float>(number(o, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(number(o, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0) bad("top_p", "must be greater than 0");
  const int64_t top_k = integer(o, "top_k", 0, -1, static_cast<int64_t>(limits.vocab_size));
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  s.min_p = static_cast<float>(number(o, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(number(o, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(number(o, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty = static_cast<float>(number(o, "repetition_penalty", 1.0, 0.0, 10.0));
  if (s.repetition_penalty <= 0) bad("repetition_penalty", "must be greater than 0");
  s.seed = integer(o, "seed", -1, INT64_MIN / 2, INT64_MAX / 2);
  parse_logit_bias(o, limits, s);

  // Chat: logprobs is a bool and top_logprobs a count; completions: logprobs is the count.
  if (kind == api_kind::chat) {
    s.logprobs = boolean(o, "logprobs", false);
    s.top_logprobs = static_cast<int32_t>(integer(o, "top_logprobs", 0, 0, 20));
    if (s.top_logprobs > 0 && !s.logprobs) bad("top_logprobs", "needs logprobs: true");
  } else {
    const json::value* lp = field(o, "logprobs");
    if (lp && lp->is_bool()) bad("logprobs", "must be an integer (alternatives per token) for completions");
    const int64_t k = integer(o, "logprobs", -1, 0, 20);
    s.logprobs = k >= 0;
    s.top_logprobs = static_cast<int32_t>(std::max<int64_t>(k, 0));
  }
  // Prompt logprobs: vLLM's prompt_logprobs (alternatives per prompt token) into the choice's
  // prompt_logprobs; echo with logprobs into the logprobs arrays, as many alternatives.
  s.prompt_logprobs = static_cast<int32_t>(integer(o, "prompt_logprobs", -1, -1, 20));
  r.prompt_logprobs = s.prompt_logprobs >= 0;
  if (r.echo && s.logprobs) s.prompt_logprobs = std::max(s.prompt_logprobs, s.top_logprobs);
  if (s.prompt_logprobs >= 0 && r.n > 1) {
    bad("n", "must be 1 when the prompt is scored (prompt_logprobs, or echo with logprobs)");
  }
  return r;
}

}  // namespace tandem::net
