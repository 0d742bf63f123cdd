#include "net/routes.h"

#include <boost/json.hpp>
#include <cmath>

#include "actors/runtime_access.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/prompt_encoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "net/anthropic/anthropic_job.h"
#include "net/generation_job.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;

namespace {

constexpr route kRoutes[] = {
    {"/health", false, route_kind::health, false},
    {"/", false, route_kind::chat_page, false},
    {"/index.html", false, route_kind::chat_page, false},
    {"/metrics", false, route_kind::metrics, false},
    {"/v1/models", false, route_kind::models, true},
    {"/tokenize", true, route_kind::tokenize, true},
    {"/detokenize", true, route_kind::detokenize, true},
    {"/v1/embeddings", true, route_kind::embeddings, true},
    {"/v1/rerank", true, route_kind::rerank, true},
    {"/rerank", true, route_kind::rerank, true},
    {"/v1/chat/completions", true, route_kind::chat_completions, true},
    {"/v1/completions", true, route_kind::completions, true},
    {"/v1/responses", true, route_kind::responses, true},
    {"/v1/responses/", false, route_kind::stored_response, true, true, true},
    {"/v1/messages", true, route_kind::messages, true},
    {"/v1/messages/count_tokens", true, route_kind::count_tokens, true},
    {"/v1/files", true, route_kind::batch_api, true, false, false, true},
    {"/v1/files/", false, route_kind::batch_api, true, true, true, true},
    {"/v1/batches", true, route_kind::batch_api, true, false, false, true},
    {"/v1/batches/", false, route_kind::batch_api, true, true, false, true},
    {"/models/load", true, route_kind::models_admin, false},
    {"/models/unload", true, route_kind::models_admin, false},
    {"/v1/moderations", true, route_kind::moderations, true},
};

http_reply json_reply(const json::value& v) {
  http_reply r;
  r.body = json::serialize(v);
  return r;
}

}  // namespace

const route* find_route(std::string_view path) {
  for (const auto& r : kRoutes) {
    if (r.takes_id ? path.size() > r.path.size() && path.starts_with(r.path) : r.path == path) return &r;
  }
  return nullptr;
}

std::string_view route_id(const route& r, std::string_view path) {
  return r.takes_id ? path.substr(r.path.size()) : std::string_view();
}

std::optional<api_error> refuse_method(const route& r, std::string_view method) {
  if (r.own_methods) return std::nullopt;
  const bool get = method == "GET" || method == "HEAD";
  if (r.post ? method == "POST" : get || (r.deletes && method == "DELETE")) return std::nullopt;
  return api_error(405, std::string("use ") +
                            (r.post      ? "POST"
                             : r.deletes ? "GET or DELETE"
                                         : "GET") +
                            " for " + std::string(r.path) + (r.takes_id ? "{id}" : ""));
}

http_reply error_reply(const api_error& e) {
  http_reply r;
  r.status = e.status;
  r.body = error_body(e);
  if (e.retry_after_s > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(e.retry_after_s))));
  }
  return r;
}

void add_rate_limit_headers(std::vector<std::pair<std::string, std::string>>& headers, const submit_reply& r) {
  if (r.limit_requests >= 0) {
    headers.emplace_back("x-ratelimit-limit-requests", std::to_string(r.limit_requests));
    headers.emplace_back("x-ratelimit-remaining-requests", std::to_string(r.remaining_requests));
  }
  if (r.limit_tokens >= 0) {
    headers.emplace_back("x-ratelimit-limit-tokens", std::to_string(r.limit_tokens));
    headers.emplace_back("x-ratelimit-remaining-tokens", std::to_string(r.remaining_tokens));
  }
}

http_reply immediate_reply(const route& r, const runtime* rt, const std::string& chat_page,
                           const std::string& served_model_name) {
  switch (r.kind) {
    case route_kind::health:
      return health_reply(rt);
    case route_kind::chat_page:
      if (chat_page.empty()) throw api_error(404, "no chat page configured");
      return http_reply{200, "text/html; charset=utf-8", chat_page, {}};
    case route_kind::models:
      return models_reply(*rt, served_model_name);
    default:
      throw api_error(404, "no such endpoint");
  }
}

http_reply generation_reply(const generation_job& job) {
  http_reply reply;
  if (job.failure()) {
    reply = job.is_anthropic() ? anthropic_error_reply(*job.failure()) : error_reply(*job.failure());
  } else {
    reply.body = job.json_body();
  }
  add_rate_limit_headers(reply.headers, job.limits());
  return reply;
}

http_reply health_reply(const runtime* rt) {
  http_reply r;
  r.status = rt ? 200 : 503;
  r.body = rt ? "{\"status\":\"ok\"}" : "{\"status\":\"loading\"}";
  return r;
}

http_reply deleted_response_reply(const std::string& id) {
  return json_reply(json::object{{"id", id}, {"object", "response"}, {"deleted", true}});
}

http_reply models_reply(const runtime& rt, const std::string& served_model_name) {
  json::object m{{"id", served_model_name},
                 {"object", "model"},
                 {"created", 0},
                 {"owned_by", "tandem"},
                 {"max_model_len", rt.max_model_len()}};
  json::array data{std::move(m)};
  // Each LoRA adapter as "<model>:NAME" (the model field picks it; parent names the base).
  for (const auto& name : runtime_access::adapter_names(rt)) {
    data.push_back(json::object{{"id", served_model_name + ":" + name},
                                {"object", "model"},
                                {"created", 0},
                                {"owned_by", "tandem"},
                                {"parent", served_model_name},
                                {"max_model_len", rt.max_model_len()}});
  }
  return json_reply(json::object{{"object", "list"}, {"data", std::move(data)}});
}

namespace {

json::object model_entry(const model_info& m) {
  json::array aliases;
  for (const auto& a : m.aliases) aliases.push_back(json::string(a));
  json::object o{{"id", m.name},
                 {"object", "model"},
                 {"created", 0},
                 {"owned_by", "tandem"},
                 {"state", model_state_name(m.state)},
                 {"aliases", std::move(aliases)},
                 {"bytes", m.bytes},
                 {"in_use", m.in_use},
                 {"keep_alive", m.keep_alive_s},
                 {"pinned", m.pinned}};
  if (m.state == model_state::loaded) {
    o["max_model_len"] = m.max_model_len;
    o["idle_seconds"] = m.idle_s;
  }
  return o;
}

}  // namespace

http_reply model_list_reply(const std::vector<model_info>& models) {
  json::array data;
  for (const auto& m : models) {
    data.push_back(model_entry(m));
    // Its LoRA adapters as "<model>:NAME", as a server of one lists them (models_reply).
    for (const auto& a : m.adapters) {
      json::object o = model_entry(m);
      o["id"] = m.name + ":" + a;
      o["parent"] = m.name;
      o.erase("aliases");
      data.push_back(std::move(o));
    }
  }
  return json_reply(json::object{{"object", "list"}, {"data", std::move(data)}});
}

http_reply model_entry_reply(const model_info& m) { return json_reply(model_entry(m)); }

http_reply tokenize_reply(std::string_view body_text, const runtime& rt, const api_limits& limits) {
  const auto body = parse_json_body(body_text);
  const auto& o = body.get_object();
  std::vector<token_id> ids;
  if (o.contains("messages")) {
    const api_request chat = parse_api_request(body, api_kind::chat, limits);
    if (!runtime_access::chat(rt))
      throw api_error(400, "this model has no usable chat template: " + runtime_access::chat_error(rt), "messages");
    std::vector<chat_message> msgs;
    for (const auto& m : chat.gen.messages) msgs.push_back({m.role, m.content});
    const auto agp = o.find("add_generation_prompt");
    const bool add_generation_prompt = agp == o.end() || !agp->value().is_bool() || agp->value().get_bool();
    try {
      ids = encode_chat(runtime_access::tok(rt), *runtime_access::chat(rt), msgs, add_generation_prompt);
    } catch (const std::exception& e) {
      throw api_error(400, e.what(), "messages");
    }
  } else {
    const auto p = o.find("prompt");
    if (p == o.end() || !p->value().is_string()) throw api_error(400, "'prompt' must be a string", "prompt");
    const auto ast = o.find("add_special_tokens");
    if (ast != o.end() && !ast->value().is_bool()) {
      throw api_error(400, "'add_special_tokens' must be true or false", "add_special_tokens");
    }
    const bool add_special = ast == o.end() || ast->value().get_bool();
    const std::string_view text(p->value().get_string());
    ids =
        add_special ? encode_prompt(runtime_access::tok(rt), text) : runtime_access::tok(rt).encode(text, false, false);
  }
  json::array tokens;
  for (token_id t : ids) tokens.push_back(t);
  return json_reply(
      json::object{{"count", ids.size()}, {"max_model_len", rt.max_model_len()}, {"tokens", std::move(tokens)}});
}

http_reply detokenize_reply(std::string_view body_text, const runtime& rt) {
  const auto body = parse_json_body(body_text);
  const auto& o = body.get_object();
  const auto t = o.find("tokens");
  if (t == o.end() || !t->value().is_array()) throw api_error(400, "'tokens' must be a list of token ids", "tokens");
  std::vector<token_id> ids;
  const size_t vocab = runtime_access::tok(rt).vocab_size();
  for (const auto& v : t->value().get_array()) {
    if (!v.is_int64() || v.get_int64() < 0 || static_cast<size_t>(v.get_int64()) >= vocab) {
      throw api_error(
          400,
          "'tokens' must hold token ids from 0 to " + std::to_string(vocab - 1) + " (got " + json::serialize(v) + ")",
          "tokens");
    }
    ids.push_back(static_cast<token_id>(v.get_int64()));
  }
  return json_reply(json::object{{"prompt", runtime_access::tok(rt).decode(ids, true)}});
}

std::string named_model(const json::value& body) {
  const json::value* m = body.is_object() ? body.get_object().if_contains("model") : nullptr;
  return m && m->is_string() ? std::string(m->get_string()) : std::string();
}

std::string body_model(std::string_view body) {
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  return ec ? std::string() : named_model(v);
}

}  // namespace tandem::net
