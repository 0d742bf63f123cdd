#include "net/openai_request.h"

#include <charconv>

#include <boost/json.hpp>
#include <cmath>

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

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw api_error(400, "'" + field + "' " + why, field);
}

const json::value* field(const json::object& o, std::string_view name) {
  const auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return nullptr;
  return &it->value();
}

}  // namespace

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

// A message's content: a string, or a list of {"type": "text", "text": ...} parts.
std::string message_content(const json::value& v, const std::string& where) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_null()) return {};
  if (!v.is_array()) bad(where, "must be a string or a list of text parts");
  std::string out;
  for (const auto& part : v.get_array()) {
    if (!part.is_object()) bad(where, "parts must be objects");
    const auto& p = part.get_object();
    if (string(p, "type") != "text") bad(where, "supports only parts of type 'text'");
    out += string(p, "text");
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
    if (t.role != "system" && t.role != "user" && t.role != "assistant") {
      bad(where + ".role", "must be 'system', 'user' or 'assistant' (got '" + t.role + "')");
    }
    const auto c = mo.find("content");
    if (c == mo.end()) bad(where + ".content", "is required");
    t.content = message_content(c->value(), where + ".content");
    gen.messages.push_back(std::move(t));
  }
}

void parse_prompt(const json::object& o, generate_request& gen) {
  const json::value* v = field(o, "prompt");
  if (!v) bad("prompt", "is required");
  if (v->is_string()) {
    gen.prompt = std::string(v->get_string());
  } else if (v->is_array() && v->get_array().size() == 1 && v->get_array()[0].is_string()) {
    gen.prompt = std::string(v->get_array()[0].get_string());
  } else {
    bad("prompt", "must be a string (one prompt per request)");
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

void reject_unsupported(const json::object& o) {
  for (const char* name : {"tools", "functions", "tool_choice", "function_call", "suffix"}) {
    if (field(o, name)) bad(name, "is not supported by this server");
  }
  if (boolean(o, "echo", false)) bad("echo", "is not supported by this server");
  if (integer(o, "best_of", 1, 1, 1) != 1) bad("best_of", "is not supported");
  if (const json::value* rf = field(o, "response_format")) {
    if (!rf->is_object() || string(rf->get_object(), "type") != "text") {
      bad("response_format", "supports only {\"type\": \"text\"}");
    }
  }
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
  if (kind == api_kind::chat)
    parse_messages(o, gen);
  else
    parse_prompt(o, gen);

  const int64_t max_len = limits.max_model_len;
  const int64_t fallback = kind == api_kind::chat ? max_len : 16;
  int64_t max_tokens = integer(o, "max_tokens", fallback, 1, max_len);
  max_tokens = integer(o, "max_completion_tokens", max_tokens, 1, max_len);
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
  return r;
}

}  // namespace tandem::net
