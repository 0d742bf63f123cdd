// The Responses API's plain C++: the translator (net/openai/responses_request.h) from a Responses
// body to the chat request, the event formatter (net/openai/responses_events.h) fed deltas as the
// chat stream gets them, and the stored responses' shelf (actors/responses/response_shelf.h) with time
// passed in.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "actors/responses/response_shelf.h"
#include "net/openai/responses_events.h"
#include "net/openai/responses_request.h"
#include "tests/unit/request_limits.h"

using namespace tandem;
using namespace tandem::net;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

api_limits limits() { return tandem::testing::default_model_limits(); }

responses_request parse(std::string_view body) { return parse_responses_request(parse_json_body(body), limits()); }

api_error error_of(std::string_view body) {
  try {
    const auto r = parse(body);
    responses_api_request(r, {}, limits());
  } catch (const api_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return api_error(0, "");
}

std::vector<json::object> parse_events(const std::vector<std::string>& frames) {
  std::vector<json::object> out;
  for (const auto& f : frames) out.push_back(json::parse(f).as_object());
  return out;
}

}  // namespace

TEST(ResponsesRequest, AStringInputIsOneUserMessageAfterTheInstructions) {
  const auto r = parse(R"({"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 12,
      "temperature": 0.5, "top_p": 0.9, "user": "u", "metadata": {"k": "v"}, "store": false})");
  EXPECT_FALSE(r.store);
  const api_request req = responses_api_request(r, {}, limits());
  ASSERT_EQ(req.gen.messages.size(), 2u);
  EXPECT_EQ(req.gen.messages[0].role, "system");
  EXPECT_EQ(req.gen.messages[0].content, "Be brief.");
  EXPECT_EQ(req.gen.messages[1].role, "user");
  EXPECT_EQ(req.gen.messages[1].content, "Hi");
  EXPECT_EQ(req.gen.max_tokens, 12u);
  EXPECT_FLOAT_EQ(req.gen.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(req.gen.sampling.top_p, 0.9f);
  EXPECT_EQ(req.n, 1u);
  EXPECT_EQ(r.echo.at("metadata").as_object().at("k").as_string(), "v");
  EXPECT_EQ(r.echo.at("max_output_tokens").as_int64(), 12);
  EXPECT_EQ(r.echo.at("instructions").as_string(), "Be brief.");
}

TEST(ResponsesRequest, ItemsBecomeChatTurnsWithToolCallsAndResults) {
  const auto r = parse(R"({"input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                      {"type": "input_text", "text": "in Paris?"}]},
      {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
      {"type": "reasoning", "summary": []}],
      "tools": [{"type": "function", "name": "weather", "description": "d",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "tool_choice": {"type": "function", "name": "weather"}})");
  const api_request req = responses_api_request(r, {}, limits());
  ASSERT_EQ(req.gen.messages.size(), 4u);
  EXPECT_EQ(req.gen.messages[0].role, "system");
  EXPECT_EQ(req.gen.messages[1].content, "Weather in Paris?");
  EXPECT_EQ(req.gen.messages[2].role, "assistant");
  ASSERT_EQ(req.gen.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(req.gen.messages[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(req.gen.messages[2].tool_calls[0].name, "weather");
  EXPECT_EQ(req.gen.messages[3].role, "tool");
  EXPECT_EQ(req.gen.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(req.gen.messages[3].name, "weather");
  EXPECT_EQ(req.gen.messages[3].content, "sunny");
  EXPECT_EQ(req.tool_names, (std::vector<std::string>{"weather"}));
  EXPECT_EQ(req.tool_choice, tool_choice_mode::named);
  EXPECT_EQ(req.tool_choice_name, "weather");
  // The template sees the tools in chat's nested form.
  const auto tools = json::parse(req.gen.tools_json).as_array();
  EXPECT_EQ(tools[0].at("function").at("name").as_string(), "weather");
}

TEST(ResponsesRequest, AContinuationPutsTheStoredConversationFirst) {
  const auto first = parse(R"({"input": "My name is Ada."})");
  json::array history = first.input;
  history.push_back(json::parse(R"({"type": "message", "role": "assistant",
      "content": [{"type": "output_text", "text": "Hello Ada."}]})"));
  const auto next = parse(R"({"input": "What is my name?", "instructions": "Answer briefly.",
      "previous_response_id": "resp_1"})");
  EXPECT_EQ(next.previous_response_id, "resp_1");
  const api_request req = responses_api_request(next, history, limits());
  ASSERT_EQ(req.gen.messages.size(), 4u);
  EXPECT_EQ(req.gen.messages[0].content, "Answer briefly.");
  EXPECT_EQ(req.gen.messages[1].content, "My name is Ada.");
  EXPECT_EQ(req.gen.messages[2].role, "assistant");
  EXPECT_EQ(req.gen.messages[2].content, "Hello Ada.");
  EXPECT_EQ(req.gen.messages[3].content, "What is my name?");
}

TEST(ResponsesRequest, TextFormatBecomesTheResponseFormat) {
  const auto js = responses_api_request(parse(R"({"input": "x", "text": {"format": {"type": "json_schema",
      "name": "p", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})"),
                                        {}, limits());
  EXPECT_EQ(js.gen.grammar.type, output_grammar::kind::json_schema);
  EXPECT_EQ(json::parse(js.gen.grammar.text).at("type").as_string(), "object");
  const auto jo =
      responses_api_request(parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})"), {}, limits());
  EXPECT_EQ(jo.gen.grammar.type, output_grammar::kind::json_object);
  const auto plain =
      responses_api_request(parse(R"({"input": "x", "text": {"format": {"type": "text"}}})"), {}, limits());
  EXPECT_EQ(plain.gen.grammar.type, output_grammar::kind::none);
}

TEST(ResponsesRequest, BadInputNamesTheResponsesField) {
  EXPECT_EQ(error_of(R"({"model": "m"})").param, "input");
  EXPECT_EQ(error_of(R"({"input": []})").param, "input");
  EXPECT_EQ(error_of(R"({"input": [{"role": "robot", "content": "x"}]})").param, "input[0].role");
  // Images come inline: a URL to fetch names the part's image_url; an image in an
  // assistant's message names its type.
  EXPECT_EQ(error_of(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})").param,
            "input[0].content[0].image_url");
  EXPECT_EQ(
      error_of(R"({"input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "data:,x"}]}]})")
          .param,
      "input[0].content[0].type");
  EXPECT_EQ(error_of(R"({"input": [{"type": "item_reference", "id": "x"}]})").param, "input[0].type");
  EXPECT_EQ(error_of(R"({"input": [{"type": "function_call_output", "output": "x"}]})").param, "input[0].call_id");
  const api_error web = error_of(R"({"input": "x", "tools": [{"type": "web_search"}]})");
  EXPECT_EQ(web.status, 400);
  EXPECT_EQ(web.param, "tools[0].type");
  EXPECT_NE(std::string(web.what()).find("web_search"), std::string::npos) << web.what();
  EXPECT_EQ(error_of(R"({"input": "x", "tools": [{"type": "function", "name": "bad name"}]})").param, "tools[0].name");
  EXPECT_EQ(error_of(R"({"input": "x", "max_output_tokens": 0})").param, "max_output_tokens");
  EXPECT_EQ(error_of(R"({"input": "x", "max_output_tokens": 100000})").param, "max_output_tokens");
  EXPECT_EQ(error_of(R"({"input": "x", "temperature": 3})").param, "temperature");
  EXPECT_EQ(error_of(R"({"input": "x", "text": {"format": {"type": "xml"}}})").param, "text.format.type");
  EXPECT_EQ(error_of(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}})").param,
            "text.format.schema");
  EXPECT_EQ(error_of(R"({"input": "x", "background": true})").param, "background");
  EXPECT_EQ(error_of(R"({"input": "x", "store": "yes"})").param, "store");
  EXPECT_EQ(error_of(R"({"input": "x", "metadata": {"k": 1}})").param, "metadata");
  EXPECT_EQ(error_of(R"({"input": "x", "tool_choice": "required"})").param, "tool_choice");
}

TEST(ResponsesEvents, AStreamedReplyIsTypedEventsInOrder) {
  responses_events ev("resp_abc", "m", 100, json::object{{"store", true}}, responses_framing::websocket);
  std::vector<std::string> out;
  ev.start(out);
  ev.delta("Hel", {}, out);
  ev.delta("lo", {}, out);
  ev.finish(finish_reason::stop, false, {10, 2, 4}, out);
  const auto events = parse_events(out);
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    types.emplace_back(events[i].at("type").as_string());
    EXPECT_EQ(events[i].at("sequence_number").as_int64(), static_cast<int64_t>(i));
  }
  EXPECT_EQ(types,
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[2].at("item").at("id").as_string(), "msg_abc");
  EXPECT_EQ(events[6].at("text").as_string(), "Hello");
  const auto& done = events.back().at("response").as_object();
  EXPECT_EQ(done.at("status").as_string(), "completed");
  EXPECT_EQ(done.at("store").as_bool(), true) << "the echo fields are the Response's";
  EXPECT_EQ(done.at("output").at(0).at("content").at(0).at("text").as_string(), "Hello");
  EXPECT_EQ(done.at("usage").at("input_tokens").as_int64(), 10);
  EXPECT_EQ(done.at("usage").at("total_tokens").as_int64(), 12);
  EXPECT_EQ(done.at("usage").at("input_tokens_details").at("cached_tokens").as_int64(), 4);
}

TEST(ResponsesEvents, SseFramesNameTheEvent) {
  responses_events ev("resp_x", "m", 1, {}, responses_framing::sse);
  std::vector<std::string> out;
  ev.start(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rfind("event: response.created\ndata: {", 0), 0u) << out[0];
  EXPECT_EQ(out[0].substr(out[0].size() - 2), "\n\n");
}

TEST(ResponsesEvents, ToolCallsAreFunctionCallItems) {
  responses_events ev("resp_t", "m", 1, {}, responses_framing::websocket);
  std::vector<std::string> out;
  ev.start(out);
  ev.delta("", {{0, "call_9", "weather", "{\"city\":"}}, out);
  ev.delta("", {{0, "", "", "\"Oslo\"}"}}, out);
  ev.finish(finish_reason::tool_calls, false, {5, 5, 0}, out);
  const auto events = parse_events(out);
  EXPECT_EQ(events[2].at("type").as_string(), "response.output_item.added");
  EXPECT_EQ(events[2].at("item").at("type").as_string(), "function_call");
  EXPECT_EQ(events[3].at("type").as_string(), "response.function_call_arguments.delta");
  const auto& resp = events.back().at("response");
  ASSERT_EQ(resp.at("output").as_array().size(), 1u) << "no empty message beside the call";
  const auto& call = resp.at("output").at(0);
  EXPECT_EQ(call.at("call_id").as_string(), "call_9");
  EXPECT_EQ(call.at("name").as_string(), "weather");
  EXPECT_EQ(call.at("arguments").as_string(), "{\"city\":\"Oslo\"}");
  const auto items = ev.conversation_items();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].at("type").as_string(), "function_call");
}

TEST(ResponsesEvents, MaxOutputTokensMakesItIncomplete) {
  responses_events ev("resp_l", "m", 1, {}, responses_framing::none);
  std::vector<std::string> out;
  ev.start(out);
  ev.delta("abc", {}, out);
  ev.finish(finish_reason::length, false, {1, 3, 0}, out);
  EXPECT_TRUE(out.empty()) << "no framing, no events";
  const auto r = ev.response();
  EXPECT_EQ(r.at("status").as_string(), "incomplete");
  EXPECT_EQ(r.at("incomplete_details").at("reason").as_string(), "max_output_tokens");
  EXPECT_EQ(r.at("output").at(0).at("status").as_string(), "incomplete");
}

TEST(ResponsesEvents, AnErrorEventNamesTheCode) {
  const auto e =
      json::parse(responses_error_event(api_error(409, "busy", "stream_id", "response_already_in_flight"), "lane-1"));
  EXPECT_EQ(e.at("type").as_string(), "error");
  EXPECT_EQ(e.at("status").as_int64(), 409);
  EXPECT_EQ(e.at("error").at("code").as_string(), "response_already_in_flight");
  EXPECT_EQ(e.at("error").at("param").as_string(), "stream_id");
  EXPECT_EQ(e.at("stream_id").as_string(), "lane-1");
}

TEST(ResponseShelf, KeepsEachTenantsOwnAndFindsNoOtherTenants) {
  response_shelf shelf({10, 1 << 20, 3600s});
  const auto t0 = response_shelf::clock::now();
  ASSERT_TRUE(shelf.put({"alice", "resp_1", "[]", "{}"}, t0));
  EXPECT_NE(shelf.find("alice", "resp_1", t0), nullptr);
  EXPECT_EQ(shelf.find("bob", "resp_1", t0), nullptr);
  EXPECT_FALSE(shelf.erase("bob", "resp_1"));
  EXPECT_TRUE(shelf.erase("alice", "resp_1"));
  EXPECT_EQ(shelf.find("alice", "resp_1", t0), nullptr);
}

TEST(ResponseShelf, CountBytesAndAgeBoundEachTenant) {
  const auto t0 = response_shelf::clock::now();
  response_shelf by_count({2, 1 << 20, 3600s});
  for (const char* id : {"r0", "r1", "r2"}) by_count.put({"a", id, "[]", "{}"}, t0);
  EXPECT_EQ(by_count.count("a"), 2u);
  EXPECT_EQ(by_count.find("a", "r0", t0), nullptr) << "the oldest goes first";
  by_count.put({"b", "r9", "[]", "{}"}, t0);
  EXPECT_NE(by_count.find("a", "r1", t0), nullptr) << "another tenant's put evicts none of a's";

  response_shelf by_bytes({100, 1000, 3600s});
  const std::string big(400, 'x');
  for (const char* id : {"r0", "r1", "r2"}) by_bytes.put({"a", id, big, "{}"}, t0);
  EXPECT_LE(by_bytes.bytes("a"), 1000u);
  EXPECT_EQ(by_bytes.count("a"), 2u);
  EXPECT_FALSE(by_bytes.put({"a", "huge", std::string(2000, 'x'), "{}"}, t0)) << "over the whole budget";

  response_shelf by_age({100, 1 << 20, 60s});
  by_age.put({"a", "old", "[]", "{}"}, t0);
  by_age.put({"a", "new", "[]", "{}"}, t0 + 30s);
  EXPECT_EQ(by_age.find("a", "old", t0 + 61s), nullptr);
  EXPECT_NE(by_age.find("a", "new", t0 + 61s), nullptr);
  by_age.sweep(t0 + 120s);
  EXPECT_EQ(by_age.count("a"), 0u);
}
