// What the network front writes, as plain C++ (no sockets): the route table and its replies
// (net/routes.h), and a generation's wire output in each format (net/generation_job.h) from
// fixed sink events. The serving tests (tests/python) check the same against real clients.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "net/generation_job.h"
#include "net/routes.h"

using namespace tandem;
using namespace tandem::net;
namespace json = boost::json;

namespace {

using headers = std::vector<std::pair<std::string, std::string>>;

std::string header(const headers& h, const std::string& name) {
  for (const auto& [n, v] : h) {
    if (n == name) return v;
  }
  return "";
}

submit_reply accepted(int64_t limit_requests = -1) {
  submit_reply r;
  r.accepted = true;
  r.id = 1;
  r.tenant = "alice";
  r.limit_requests = limit_requests;
  r.remaining_requests = limit_requests >= 0 ? limit_requests - 1 : -1;
  return r;
}

generation_delta delta(std::string text, std::vector<int32_t> tokens) {
  generation_delta d;
  d.text = std::move(text);
  d.tokens = std::move(tokens);
  return d;
}

generation_done done(finish_reason why, uint32_t prompt_tokens, uint32_t completion_tokens) {
  generation_done d;
  d.reason = why;
  d.prompt_tokens = prompt_tokens;
  d.completion_tokens = completion_tokens;
  return d;
}

generation_job job(job_format format, uint32_t n = 1, bool include_usage = false) {
  api_request r;
  r.kind = format == job_format::completion_sse || format == job_format::completion_json ? api_kind::completion
                                                                                         : api_kind::chat;
  r.n = n;
  r.stream = format == job_format::chat_sse || format == job_format::completion_sse;
  r.include_usage = include_usage;
  job_context c;
  c.model_name = "m";
  c.response_id = "chatcmpl-1";
  c.created = 1700000000;
  return generation_job(std::move(r), format, std::move(c));
}

// The JSON objects of the SSE events in `out`, and whether [DONE] ended them.
std::vector<json::object> events(const std::vector<std::string>& out, bool& done_seen) {
  std::vector<json::object> ev;
  done_seen = false;
  for (const auto& s : out) {
    EXPECT_TRUE(s.starts_with("data: ") && s.ends_with("\n\n")) << s;
    const std::string payload = s.substr(6, s.size() - 8);
    if (payload == "[DONE]") {
      done_seen = true;
      continue;
    }
    EXPECT_FALSE(done_seen) << "an event after [DONE]";
    ev.push_back(json::parse(payload).as_object());
  }
  return ev;
}

}  // namespace

TEST(Routes, OneTableForEveryPath) {
  ASSERT_NE(find_route("/v1/chat/completions"), nullptr);
  EXPECT_TRUE(find_route("/v1/chat/completions")->post);
  EXPECT_EQ(find_route("/v1/completions")->kind, route_kind::completions);
  EXPECT_FALSE(find_route("/v1/models")->post);
  EXPECT_TRUE(find_route("/tokenize")->post);
  EXPECT_FALSE(find_route("/health")->needs_model) << "/health answers while the model loads";
  EXPECT_EQ(find_route("/")->kind, route_kind::chat_page);
  EXPECT_EQ(find_route("/index.html")->kind, route_kind::chat_page);
  EXPECT_EQ(find_route("/v1/chat/completions/x"), nullptr);
  EXPECT_EQ(find_route("/nope"), nullptr);
}

TEST(Routes, ErrorsAndLimitsAsOpenAiWritesThem) {
  api_error e(429, "tenant 'alice' is over its limit", "", "rate_limit_exceeded");
  e.retry_after_s = 1.2;
  const auto r = error_reply(e);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(header(r.headers, "Retry-After"), "2") << "whole seconds, rounded up";
  const auto body = json::parse(r.body).as_object().at("error").as_object();
  EXPECT_EQ(body.at("message").as_string(), "tenant 'alice' is over its limit");
  EXPECT_EQ(body.at("type").as_string(), "rate_limit_error");
  EXPECT_EQ(body.at("code").as_string(), "rate_limit_exceeded");

  headers h;
  add_rate_limit_headers(h, accepted());
  EXPECT_TRUE(h.empty()) << "no limits, no headers";
  submit_reply limited = accepted(60);
  limited.limit_tokens = 1000;
  limited.remaining_tokens = 900;
  add_rate_limit_headers(h, limited);
  EXPECT_EQ(header(h, "x-ratelimit-limit-requests"), "60");
  EXPECT_EQ(header(h, "x-ratelimit-remaining-requests"), "59");
  EXPECT_EQ(header(h, "x-ratelimit-limit-tokens"), "1000");
  EXPECT_EQ(header(h, "x-ratelimit-remaining-tokens"), "900");

  EXPECT_EQ(health_reply(nullptr).status, 503);
  EXPECT_EQ(json::parse(health_reply(nullptr).body).as_object().at("status").as_string(), "loading");
}

TEST(GenerationJob, ChatJsonBody) {
  auto j = job(job_format::chat_json);
  j.on_event(0, accepted());
  j.on_event(0, delta("Hel", {1}));
  j.on_event(0, delta("lo", {2}));
  EXPECT_FALSE(j.finished());
  j.on_event(0, done(finish_reason::length, 5, 2));
  ASSERT_TRUE(j.finished());
  ASSERT_FALSE(j.failure());
  const auto body = json::parse(j.json_body()).as_object();
  EXPECT_EQ(body.at("id").as_string(), "chatcmpl-1");
  EXPECT_EQ(body.at("object").as_string(), "chat.completion");
  EXPECT_EQ(body.at("model").as_string(), "m");
  const auto& choice = body.at("choices").as_array().at(0).as_object();
  EXPECT_EQ(choice.at("message").as_object().at("role").as_string(), "assistant");
  EXPECT_EQ(choice.at("message").as_object().at("content").as_string(), "Hello");
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  const auto& usage = body.at("usage").as_object();
  EXPECT_EQ(usage.at("prompt_tokens").as_int64(), 5);
  EXPECT_EQ(usage.at("completion_tokens").as_int64(), 2);
  EXPECT_EQ(usage.at("total_tokens").as_int64(), 7);
}

TEST(GenerationJob, ChatStreamEventsEndWithDone) {
  auto j = job(job_format::chat_sse, 1, true);
  j.on_event(0, accepted());
  j.on_event(0, delta("Hi", {1}));
  j.on_event(0, delta(" you", {2}));
  j.on_event(0, done(finish_reason::stop, 3, 2));
  bool ended = false;
  const auto ev = events(j.take_output(), ended);
  EXPECT_TRUE(ended);
  ASSERT_GE(ev.size(), 4u);
  std::string text;
  for (const auto& e : ev) {
    EXPECT_EQ(e.at("object").as_string(), "chat.completion.chunk");
    const auto& choices = e.at("choices").as_array();
    if (choices.empty()) continue;  // the usage chunk
    const auto& d = choices.at(0).as_object().at("delta").as_object();
    if (const auto* c = d.if_contains("content")) text += std::string(c->as_string());
  }
  EXPECT_EQ(text, "Hi you");
  EXPECT_EQ(ev.front().at("choices").as_array().at(0).as_object().at("delta").as_object().at("role").as_string(),
            "assistant")
      << "the first chunk carries the role";
  const auto& last_choice = ev[ev.size() - 2].at("choices").as_array().at(0).as_object();
  EXPECT_EQ(last_choice.at("finish_reason").as_string(), "stop");
  EXPECT_TRUE(ev.back().at("choices").as_array().empty());
  EXPECT_EQ(ev.back().at("usage").as_object().at("total_tokens").as_int64(), 5) << "include_usage";
}

TEST(GenerationJob, AStopStringCutReadsAsStop) {
  // The streamer ends a sequence cut by a stop string with finish_reason::abort; the client
  // did not cancel, so OpenAI's answer is "stop".
  auto j = job(job_format::completion_json);
  j.on_event(0, accepted());
  j.on_event(0, delta("one two", {1, 2}));
  j.on_event(0, done(finish_reason::abort, 2, 2));
  const auto body = json::parse(j.json_body()).as_object();
  const auto& choice = body.at("choices").as_array().at(0).as_object();
  EXPECT_EQ(choice.at("text").as_string(), "one two");
  EXPECT_EQ(choice.at("finish_reason").as_string(), "stop");
  EXPECT_EQ(body.at("object").as_string(), "text_completion");
}

TEST(GenerationJob, ARefusalFailsTheRequestWithItsStatus) {
  auto j = job(job_format::chat_json, 2);
  submit_reply no;
  no.accepted = false;
  no.status = 429;
  no.error = "over the limit";
  no.retry_after_s = 3;
  j.on_event(0, no);
  ASSERT_TRUE(j.failure());
  EXPECT_EQ(j.failure()->status, 429);
  EXPECT_EQ(j.failure()->code, "rate_limit_exceeded");
  EXPECT_TRUE(j.finished()) << "one refused choice fails the whole request";
  EXPECT_EQ(j.final_status(), 429);
}

TEST(GenerationJob, AnErrorBeforeOutputIsTheResponse) {
  auto j = job(job_format::chat_sse);
  j.on_event(0, accepted());
  generation_done d = done(finish_reason::error, 0, 0);
  d.status = 400;
  d.error = "the prompt has 9000 tokens";
  j.on_event(0, d);
  ASSERT_TRUE(j.failure());
  EXPECT_EQ(j.failure()->status, 400);
  EXPECT_EQ(j.failure()->param, "messages");
}

TEST(Routes, StoredResponsesTakeTheirIdFromThePath) {
  const route* r = find_route("/v1/responses/resp_1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, route_kind::stored_response);
  EXPECT_EQ(route_id(*r, "/v1/responses/resp_1"), "resp_1");
  EXPECT_EQ(find_route("/v1/responses")->kind, route_kind::responses) << "POST /v1/responses creates one";
  EXPECT_EQ(find_route("/v1/responses/"), nullptr) << "no id";
  EXPECT_EQ(route_id(*find_route("/v1/models"), "/v1/models"), "");
}

TEST(Routes, EachRouteTakesItsMethods) {
  EXPECT_FALSE(refuse_method(*find_route("/v1/models"), "GET"));
  EXPECT_FALSE(refuse_method(*find_route("/health"), "HEAD")) << "HEAD is a GET";
  EXPECT_FALSE(refuse_method(*find_route("/v1/chat/completions"), "POST"));
  const auto get_a_post = refuse_method(*find_route("/v1/chat/completions"), "GET");
  ASSERT_TRUE(get_a_post);
  EXPECT_EQ(get_a_post->status, 405);
  EXPECT_EQ(std::string(get_a_post->what()), "use POST for /v1/chat/completions");
  EXPECT_EQ(std::string(refuse_method(*find_route("/v1/models"), "DELETE")->what()), "use GET for /v1/models");

  const route& stored = *find_route("/v1/responses/resp_1");
  EXPECT_FALSE(refuse_method(stored, "GET"));
  EXPECT_FALSE(refuse_method(stored, "DELETE"));
  const auto post_stored = refuse_method(stored, "POST");
  ASSERT_TRUE(post_stored);
  EXPECT_EQ(std::string(post_stored->what()), "use GET or DELETE for /v1/responses/{id}");
}

TEST(Routes, ImmediateRepliesNeedNoWaiting) {
  EXPECT_EQ(immediate_reply(*find_route("/health"), nullptr, "", "m").status, 503) << "the model is loading";
  const auto page = immediate_reply(*find_route("/"), nullptr, "<html></html>", "m");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(page.body, "<html></html>");
  try {
    immediate_reply(*find_route("/index.html"), nullptr, "", "m");
    ADD_FAILURE() << "no page configured, yet a page";
  } catch (const api_error& e) {
    EXPECT_EQ(e.status, 404);
  }
  EXPECT_EQ(deleted_response_reply("resp_\"1").body, R"({"id":"resp_\"1","object":"response","deleted":true})");
}

TEST(Routes, AFinishedGenerationIsItsJsonBodyWithTheCallersLimits) {
  auto j = job(job_format::completion_json);
  j.on_event(0, accepted(60));
  j.on_event(0, delta("hi", {1}));
  j.on_event(0, done(finish_reason::stop, 1, 1));
  const auto r = generation_reply(j);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, j.json_body());
  EXPECT_EQ(header(r.headers, "x-ratelimit-limit-requests"), "60");
  EXPECT_EQ(header(r.headers, "x-ratelimit-remaining-requests"), "59");
}

TEST(Routes, AGenerationThatFailedIsItsError) {
  auto j = job(job_format::chat_sse);
  submit_reply over;  // refused (accepted is false)
  over.status = 429;
  over.error = "over the limit";
  over.retry_after_s = 3;
  j.on_event(0, over);
  const auto r = generation_reply(j);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(header(r.headers, "Retry-After"), "3");
  EXPECT_EQ(json::parse(r.body).as_object().at("error").as_object().at("message").as_string(), "over the limit");
}
