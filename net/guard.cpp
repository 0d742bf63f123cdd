#include "net/guard.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>

#include "engine/tenants/tenant_limits.h"
#include "engine/tokenizer/utf8.h"
#include "net/await_actor.h"
#include "net/generation_request.h"
#include "net/live_job.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;

// Llama Guard 3's codes are S1..S14: a code past them would name no category.
const char* const kGuardGrammar =
    "root ::= \"safe\" | \"unsafe\\nS\" code (\",S\" code)?\n"
    "code ::= \"1\" [0-4]? | [2-9]";

guard_verdict read_guard_reply(std::string_view reply) {
  guard_verdict v;
  v.reply = std::string(reply);
  while (!reply.empty() && (reply.front() == ' ' || reply.front() == '\n')) reply.remove_prefix(1);
  if (!reply.starts_with("unsafe")) return v;
  v.flagged = true;
  reply.remove_prefix(6);
  std::string cur;
  for (const char c : reply) {
    if (c == ',' || c == '\n' || c == ' ') {
      if (!cur.empty() && std::find(v.categories.begin(), v.categories.end(), cur) == v.categories.end()) {
        v.categories.push_back(cur);  // once each ("S8,S8" is S8)
      }
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty() && std::find(v.categories.begin(), v.categories.end(), cur) == v.categories.end()) {
    v.categories.push_back(cur);
  }
  return v;
}

std::string guard_input_text(const generate_request& gen) {
  if (gen.messages.empty()) return gen.prompt;
  if (gen.messages.size() == 1) return gen.messages.front().content;
  std::string out;
  for (const auto& m : gen.messages) out += m.role + ": " + m.content + "\n";
  return out;
}

std::vector<chat_message> guard_conversation(const generate_request& gen) {
  std::vector<chat_message> out;
  if (gen.messages.empty()) {
    out.emplace_back("user", gen.prompt);
    return out;
  }
  for (const auto& m : gen.messages) {
    if (m.role == "user" || m.role == "assistant") out.emplace_back(m.role, m.content);
  }
  return out;
}

namespace {

// Llama Guard 3's hazard codes with an OpenAI moderation category of the same meaning.
constexpr std::pair<std::string_view, std::string_view> kOpenAiCategory[] = {
    {"S1", "violence"}, {"S2", "illicit"},    {"S4", "sexual/minors"}, {"S9", "illicit/violent"},
    {"S10", "hate"},    {"S11", "self-harm"}, {"S12", "sexual"}};

// Every category of OpenAI's moderation object (the openai SDK requires each).
constexpr std::string_view kOpenAiCategories[] = {"harassment",
                                                  "harassment/threatening",
                                                  "hate",
                                                  "hate/threatening",
                                                  "illicit",
                                                  "illicit/violent",
                                                  "self-harm",
                                                  "self-harm/instructions",
                                                  "self-harm/intent",
                                                  "sexual",
                                                  "sexual/minors",
                                                  "violence",
                                                  "violence/graphic"};

// usage.prompt_tokens of a finished job's JSON body (0 when absent).
uint64_t prompt_tokens_of(const generation_job& job) {
  boost::system::error_code ec;
  const json::value v = json::parse(job.json_body(), ec);
  if (ec || !v.is_object()) return 0;
  const json::value* u = v.get_object().if_contains("usage");
  const json::value* p = u && u->is_object() ? u->get_object().if_contains("prompt_tokens") : nullptr;
  return p && p->is_int64() ? static_cast<uint64_t>(p->get_int64()) : p && p->is_uint64() ? p->get_uint64() : 0;
}

}  // namespace

std::string_view openai_moderation_category(std::string_view code) {
  for (const auto& [c, name] : kOpenAiCategory) {
    if (c == code) return name;
  }
  return {};
}

const tenant_config* guard_tenant(const runtime& rt, const std::string& key) {
  const tenant_config* found = nullptr;
  for (const auto& t : rt.config().tenants) {
    for (const auto& k : t.api_keys) {
      if (constant_time_equal(k, key)) found = &t;
    }
  }
  return found;
}

boost::asio::awaitable<void> guard_check(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                         const std::string& key, const std::vector<chat_message>& conversation,
                                         const std::string& stage, guard_verdict& out) {
  model_grant held;
  co_await acquire_model(ctx, model, key, held, true);
  const runtime& rt = *held.rt;
  json::array messages;
  // The text as a client reads it: a reply cut inside a character has U+FFFD there.
  for (const auto& m : conversation) {
    messages.push_back(json::object{{"role", m.role}, {"content", utf8::replace_invalid(m.content)}});
  }
  json::object body{{"model", model},
                    {"messages", std::move(messages)},
                    {"max_tokens", 24},
                    {"temperature", 0},
                    {"grammar", kGuardGrammar}};
  api_request req = parse_api_request(body, api_kind::chat, ctx->limits(rt));
  job_context jc = completion_context(req, *ctx, rt, ctx->new_id("guard"));
  const auto ex = co_await boost::asio::this_coro::executor;
  strand_signal signal(ex);
  auto lj = std::make_shared<live_job>(generation_job(std::move(req), job_format::chat_json, std::move(jc)));
  lj->rt = held.rt;
  lj->notify = [&signal] { signal.notify(); };
  start_live_job(lj, ex, *ctx, rt, key);
  while (!lj->job.finished() && !lj->job.failure()) co_await signal.wait();
  lj->notify = nullptr;
  if (lj->job.failure()) {
    api_error e = *lj->job.failure();
    throw api_error(e.status >= 500 ? 503 : e.status, "the guard model '" + model + "' did not answer: " + e.what(), "",
                    "guard_unavailable");
  }
  out = read_guard_reply(lj->job.choice_text(0));
  ctx->metrics.count_guard(stage, out.flagged);
  // The prompt's length shows which template the guard's model rendered it with.
  std::string said = out.reply;
  std::replace(said.begin(), said.end(), '\n', ' ');
  spdlog::info("guard '{}': {} {} ({}), {} turns, {} prompt tokens", model, stage, out.flagged ? "flagged" : "safe",
               said, conversation.size(), prompt_tokens_of(lj->job));
}

boost::asio::awaitable<void> guard_check(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                         const std::string& key, const std::string& text, const std::string& stage,
                                         guard_verdict& out) {
  const std::vector<chat_message> one{chat_message("user", text)};
  co_await guard_check(ctx, model, key, one, stage, out);
}

boost::asio::awaitable<bool> guard_output_flagged(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                                  const std::string& key, const std::vector<chat_message>& conversation,
                                                  const generation_job& job) {
  const std::string stage = "output";
  for (uint32_t i = 0; i < job.choices(); ++i) {
    guard_verdict verdict;
    std::vector<chat_message> shown = conversation;
    shown.emplace_back("assistant", job.choice_text(i));  // a copy: the stream may grow it meanwhile
    co_await guard_check(ctx, model, key, shown, stage, verdict);
    if (verdict.flagged) co_return true;
  }
  co_return false;
}

boost::asio::awaitable<void> serve_moderations(const std::shared_ptr<server_context>& ctx, const std::string& body,
                                               const std::string& key, std::string& out_json) {
  const auto v = parse_json_body(body);
  if (!v.is_object()) throw api_error(400, "the body must be a JSON object");
  const auto& o = v.get_object();
  std::vector<std::string> inputs;
  const json::value* in = o.if_contains("input");
  if (in && in->is_string()) {
    inputs.emplace_back(in->get_string());
  } else if (in && in->is_array() && !in->get_array().empty() && in->get_array().size() <= 32) {
    for (const auto& x : in->get_array()) {
      if (!x.is_string()) throw api_error(400, "'input' must be a string or a list of up to 32 strings", "input");
      inputs.emplace_back(x.get_string());
    }
  } else {
    throw api_error(400, "'input' must be a string or a list of up to 32 strings", "input");
  }
  std::string model;
  const runtime* dflt = ctx->rt.load();
  if (!dflt) throw model_loading();
  if (const tenant_config* t = guard_tenant(*dflt, key); t && !t->guard.model.empty()) model = t->guard.model;
  if (model.empty()) {
    const json::value* m = o.if_contains("model");
    if (!m || !m->is_string() || m->get_string().empty()) {
      throw api_error(400, "'model' must name the guard model (the caller's tenant has no guard)", "model");
    }
    model = std::string(m->get_string());
  }
  json::array results;
  for (const auto& text : inputs) {
    guard_verdict verdict;
    const std::string stage = "moderation";
    co_await guard_check(ctx, model, key, text, stage, verdict);
    json::object categories, scores, input_types;
    for (const std::string_view name : kOpenAiCategories) {
      categories[name] = false;
      scores[name] = 0.0;
      input_types[name] = json::array{"text"};
    }
    json::array codes;
    for (const auto& c : verdict.categories) {
      codes.push_back(json::string(c));
      if (const std::string_view name = openai_moderation_category(c); !name.empty()) {
        categories[name] = true;
        scores[name] = 1.0;
      }
    }
    results.push_back(json::object{{"flagged", verdict.flagged},
                                   {"categories", std::move(categories)},
                                   {"category_scores", std::move(scores)},
                                   {"category_applied_input_types", std::move(input_types)},
                                   {"guard_categories", std::move(codes)}});
  }
  out_json =
      json::serialize(json::object{{"id", ctx->new_id("modr")}, {"model", model}, {"results", std::move(results)}});
}

}  // namespace tandem::net
