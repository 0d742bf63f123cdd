// The Anthropic Messages front's plain C++: the translator (net/anthropic/anthropic_request.h) from a
// Messages body to the chat request, and the event formatter (net/anthropic/anthropic_events.h) fed
// deltas as the chat stream gets them.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "net/anthropic/anthropic_events.h"
#include "net/anthropic/anthropic_request.h"
#include "tests/unit/request_limits.h"

using namespace tandem;
using namespace tandem::net;
namespace json = boost::json;

namespace {

api_limits limits() { return tandem::testing::default_model_limits(); }

api_request parse(std::string_view body) {
  return anthropic_api_request(parse_anthropic_request(parse_json_body(body), limits()), limits());
}

api_error error_of(std::string_view body) {
  try {
    parse(body);
  } catch (const api_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return api_error(0, "");
}

// Each SSE event as {"event": name, "data": object}; the name must equal data.type.
std::vector<json::object> parse_events(const std::vector<std::string>& frames) {
  std::vector<json::object> out;
  for (const auto& f : frames) {
    const auto nl = f.find('\n');
    EXPECT_EQ(f.rfind("event: ", 0), 0u) << f;
    EXPECT_TRUE(f.ends_with("\n\n")) << f;
    const std::string name = f.substr(7, nl - 7);
    EXPECT_EQ(f.compare(nl + 1, 6, "data: "), 0) << f;
    json::object data = json::parse(f.substr(nl + 7)).as_object();
    EXPECT_EQ(data.at("type").as_string(), name);
    out.push_back(std::move(data));
  }
  return out;
}

std::vector<std::string> types(const std::vector<json::object>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e.at("type").as_string());
  return out;
}

generation_delta text_delta(std::string text, std::vector<int32_t> tokens = {1}) {
  generation_delta d;
  d.text = std::move(text);
  d.tokens = std::move(tokens);
  return d;
}

generation_done done(finish_reason reason, uint32_t prompt, uint32_t completion, uint32_t cached = 0) {
  generation_done d;
  d.reason = reason;
  d.prompt_tokens = prompt;
  d.completion_tokens = completion;
  d.cached_tokens = cached;
  return d;
}

}  // namespace

TEST(AnthropicRequest, SystemBlocksAndTextBecomeChatTurns) {
  const api_request r = parse(R"({"model": "claude-x", "max_tokens": 12, "temperature": 0.5, "top_p": 0.9,
      "top_k": 7, "stop_sequences": ["END", ""], "metadata": {"user_id": "u-1"},
      "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
                 {"type": "text", "text": "Be kind."}],
      "messages": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  ASSERT_EQ(r.gen.messages.size(), 4u);
  EXPECT_EQ(r.gen.messages[0].role, "system");
  EXPECT_EQ(r.gen.messages[0].content, "Be brief.\nBe kind.");
  EXPECT_EQ(r.gen.messages[1].role, "user");
  EXPECT_EQ(r.gen.messages[1].content, "Hi");
  EXPECT_EQ(r.gen.messages[2].role, "assistant");
  EXPECT_EQ(r.gen.messages[2].content, "Hello.");
  EXPECT_EQ(r.gen.messages[3].content, "a\nb");
  EXPECT_EQ(r.model, "claude-x");
  EXPECT_EQ(r.gen.max_tokens, 12u);
  EXPECT_FLOAT_EQ(r.gen.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.gen.sampling.top_p, 0.9f);
  EXPECT_EQ(r.gen.sampling.top_k, 7);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.n, 1u);
  EXPECT_FALSE(r.stream);
}

TEST(AnthropicRequest, MaxTokensIsRequiredAndCappedAtTheContext) {
  const api_error e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(parse(R"({"max_tokens": 64000, "messages": [{"role": "user", "content": "Hi"}]})").gen.max_tokens, 8192u);
  // count_tokens has no max_tokens.
  const auto counted = parse_anthropic_request(
      parse_json_body(R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})"), limits(), true);
  EXPECT_EQ(anthropic_api_request(counted, limits()).gen.messages.size(), 1u);
}

TEST(AnthropicRequest, ToolUseAndToolResultBecomeCallsAndToolTurnsInOrder) {
  const api_request r = parse(R"({"max_tokens": 20,
      "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
      "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "I should ask.", "signature": "sig"},
          {"type": "text", "text": "Let me look."},
          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
          {"type": "text", "text": "And tomorrow?"}]}]})");
  ASSERT_EQ(r.gen.messages.size(), 4u);
  const auto& a = r.gen.messages[1];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "Let me look.");
  EXPECT_EQ(a.reasoning_content, "I should ask.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "toolu_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(a.tool_calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  const auto& t = r.gen.messages[2];
  EXPECT_EQ(t.role, "tool");
  EXPECT_EQ(t.tool_call_id, "toolu_1");
  EXPECT_EQ(t.name, "get_weather");
  EXPECT_EQ(t.content, "sunny");
  EXPECT_EQ(r.gen.messages[3].role, "user");
  EXPECT_EQ(r.gen.messages[3].content, "And tomorrow?");
  EXPECT_EQ(r.tool_choice, tool_choice_mode::automatic);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_TRUE(r.gen.parse_tool_calls);
  const json::value tools = json::parse(r.gen.tools_json);
  EXPECT_EQ(tools.at(0).at("function").at("name").as_string(), "get_weather");
  EXPECT_EQ(tools.at(0).at("function").at("parameters").at("type").as_string(), "object");
}

TEST(AnthropicRequest, ToolChoiceMapsOntoTheChatPath) {
  const std::string head = R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": )";
  const api_request any = parse(head + R"({"type": "any"}})");
  EXPECT_EQ(any.tool_choice, tool_choice_mode::required);
  EXPECT_EQ(any.gen.grammar.type, output_grammar::kind::tool_call);
  const api_request named = parse(head + R"({"type": "tool", "name": "f"}})");
  EXPECT_EQ(named.tool_choice, tool_choice_mode::named);
  EXPECT_EQ(named.gen.grammar.text, "f");
  const api_request none = parse(head + R"({"type": "none"}})");
  EXPECT_EQ(none.tool_choice, tool_choice_mode::none);
  EXPECT_TRUE(none.gen.tools_json.empty());
  const api_error unknown = error_of(head + R"({"type": "tool", "name": "g"}})");
  EXPECT_EQ(unknown.param, "tool_choice");
}

TEST(AnthropicRequest, ThinkingSetsTheTemplateSwitchAndTheBudget) {
  const std::string head = R"({"max_tokens": 50, "messages": [{"role": "user", "content": "x"}], "thinking": )";
  const api_request on = parse(head + R"({"type": "enabled", "budget_tokens": 16}})");
  EXPECT_EQ(on.gen.thinking_token_budget, 16u);
  EXPECT_EQ(json::parse(on.gen.chat_template_kwargs_json), json::parse(R"({"enable_thinking": true})"));
  const api_request off = parse(head + R"({"type": "disabled"}})");
  EXPECT_EQ(off.gen.thinking_token_budget, 0u);
  EXPECT_EQ(json::parse(off.gen.chat_template_kwargs_json), json::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(error_of(head + R"({"type": "enabled"}})").param, "thinking.budget_tokens");
  EXPECT_EQ(error_of(head + R"({"type": "sometimes"}})").param, "thinking.type");
}

TEST(AnthropicRequest, BadInputNamesTheAnthropicField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"max_tokens": 5, "messages": []})", "messages"},
      {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"max_tokens": 5, "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": "5", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "messages[0].content[0].source.type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
          {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}]}]})",
       "messages[0].content[0].source.data"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
          {"type": "image", "source": {"type": "url", "url": "data:,x"}}]}]})",
       "messages[1].content[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]})",
       "messages[0].content[0].tool_use_id"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "tools": [{"type": "web_search_20250305", "name": "web_search"}]})",
       "tools[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
          "tools": [{"name": "bad name", "input_schema": {"type": "object"}}]})",
       "tools[0].name"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})",
       "tools[0].input_schema"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stop_sequences": "END"})",
       "stop_sequences"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "any"}})",
       "tool_choice"},
      {R"({"max_tokens": 5, "system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]})",
       "system[0].type"},
  };
  for (const auto& [body, param] : cases) {
    const api_error e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << " -> " << e.what();
  }
}

TEST(AnthropicRequest, TheChatParsersComplaintsAreRenamedToTheAnthropicField) {
  // The chat parser finds the 17th stop string; its name for the field is "stop".
  std::string stops;
  for (int i = 0; i < 17; ++i) stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  const api_error e = error_of(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
      "stop_sequences": [)" + stops +
                               "]}");
  EXPECT_EQ(e.param, "stop_sequences");
  EXPECT_NE(std::string(e.what()).find("'stop_sequences'"), std::string::npos) << e.what();
}

TEST(AnthropicEvents, AStreamedReplyIsAnthropicsEventOrder) {
  anthropic_events ev("msg_1", "m", {}, nullptr, true);
  std::vector<std::string> frames;
  generation_delta first;
  first.reasoning_content = "hmm";
  first.tokens = {1};
  ev.delta(first, frames);
  ev.delta(text_delta("Hel"), frames);
  ev.delta(text_delta("lo"), frames);
  generation_delta call;
  call.tool_calls = {{0, "call_1", "f", "{\"a\":"}};
  call.tokens = {2};
  ev.delta(call, frames);
  generation_delta rest;
  rest.tool_calls = {{0, "", "", "1}"}};
  rest.tokens = {3};
  ev.delta(rest, frames);
  ev.finish(done(finish_reason::tool_calls, 10, 6, 4), frames);
  const auto events = parse_events(frames);
  EXPECT_EQ(types(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "content_block_start",
                                      "content_block_delta", "content_block_delta", "content_block_stop",
                                      "message_delta", "message_stop"}));
  const auto& start = events[0].at("message").as_object();
  EXPECT_EQ(start.at("id").as_string(), "msg_1");
  EXPECT_TRUE(start.at("content").as_array().empty());
  EXPECT_TRUE(start.at("stop_reason").is_null());
  EXPECT_EQ(events[2].at("content_block").at("type").as_string(), "thinking");
  EXPECT_EQ(events[3].at("delta").at("type").as_string(), "thinking_delta");
  EXPECT_EQ(events[3].at("delta").at("thinking").as_string(), "hmm");
  EXPECT_EQ(events[5].at("index").as_int64(), 1);
  EXPECT_EQ(events[6].at("delta").at("text").as_string(), "Hel");
  EXPECT_EQ(events[9].at("content_block").at("type").as_string(), "tool_use");
  EXPECT_EQ(events[9].at("content_block").at("id").as_string(), "call_1");
  EXPECT_EQ(events[9].at("content_block").at("name").as_string(), "f");
  EXPECT_EQ(events[10].at("delta").at("type").as_string(), "input_json_delta");
  EXPECT_EQ(events[11].at("delta").at("partial_json").as_string(), "1}");
  EXPECT_EQ(events[12].at("index").as_int64(), 2);
  const auto& md = events[13];
  EXPECT_EQ(md.at("delta").at("stop_reason").as_string(), "tool_use");
  EXPECT_TRUE(md.at("delta").at("stop_sequence").is_null());
  EXPECT_EQ(md.at("usage").at("input_tokens").as_int64(), 6);  // 10 prompt tokens, 4 from the cache
  EXPECT_EQ(md.at("usage").at("cache_read_input_tokens").as_int64(), 4);
  EXPECT_EQ(md.at("usage").at("output_tokens").as_int64(), 6);

  const json::object m = ev.message();
  const auto& content = m.at("content").as_array();
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0].at("thinking").as_string(), "hmm");
  EXPECT_EQ(content[1].at("text").as_string(), "Hello");
  EXPECT_EQ(content[2].at("input"), json::parse(R"({"a": 1})"));
  EXPECT_EQ(m.at("stop_reason").as_string(), "tool_use");
}

TEST(AnthropicEvents, AnEmptyReplyStillStartsAndStops) {
  anthropic_events ev("msg_1", "m", {}, nullptr, true);
  std::vector<std::string> frames;
  ev.finish(done(finish_reason::stop, 3, 1), frames);
  EXPECT_EQ(types(parse_events(frames)),
            (std::vector<std::string>{"message_start", "ping", "message_delta", "message_stop"}));
  EXPECT_EQ(ev.message().at("stop_reason").as_string(), "end_turn");
}

TEST(AnthropicEvents, StopReasonsFromHowTheGenerationEnded) {
  auto reason = [](std::vector<std::string> stops, finish_reason why, uint32_t delivered, uint32_t counted) {
    anthropic_events ev("msg_1", "m", std::move(stops), nullptr, false);
    std::vector<std::string> frames;
    ev.delta(text_delta("abc", std::vector<int32_t>(delivered, 5)), frames);
    ev.finish(done(why, 3, counted), frames);
    EXPECT_TRUE(frames.empty());  // not streamed: only the Message
    const json::object m = ev.message();
    return std::string(m.at("stop_reason").as_string()) + "/" +
           (m.at("stop_sequence").is_null() ? "null" : std::string(m.at("stop_sequence").as_string()));
  };
  EXPECT_EQ(reason({}, finish_reason::length, 4, 4), "max_tokens/null");
  EXPECT_EQ(reason({}, finish_reason::stop, 4, 5), "end_turn/null");
  // An end-of-generation token is counted but not delivered; a stop sequence's tokens are.
  EXPECT_EQ(reason({"END"}, finish_reason::stop, 4, 5), "end_turn/null");
  EXPECT_EQ(reason({"END"}, finish_reason::stop, 4, 4), "stop_sequence/END");
  EXPECT_EQ(reason({"END"}, finish_reason::tool_calls, 4, 5), "tool_use/null");
}

TEST(AnthropicEvents, AnErrorAfterTheStartIsAnErrorEvent) {
  anthropic_events ev("msg_1", "m", {}, nullptr, true);
  std::vector<std::string> frames;
  ev.delta(text_delta("a"), frames);
  ev.fail(api_error(500, "the device failed"), frames);
  const auto events = parse_events(frames);
  EXPECT_EQ(events.back().at("type").as_string(), "error");
  EXPECT_EQ(events.back().at("error").at("type").as_string(), "api_error");
  EXPECT_EQ(events.back().at("error").at("message").as_string(), "the device failed");
}

TEST(AnthropicErrors, StatusesHaveAnthropicsTypes) {
  EXPECT_STREQ(anthropic_error_type(400), "invalid_request_error");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(403), "permission_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(413), "request_too_large");
  EXPECT_STREQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
  const json::value body = json::parse(anthropic_error_body(api_error(429, "slow down")));
  EXPECT_EQ(body, json::parse(R"({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})"));
}
