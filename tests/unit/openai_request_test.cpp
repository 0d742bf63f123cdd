// The OpenAI request parser (net/openai/openai_request.h) on its own: what a body becomes, and the
// 400 that names the field for each kind of bad input, with numbers as a person writes them.
#include "net/openai/openai_request.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tests/unit/request_limits.h"

using namespace tandem;
using namespace tandem::net;

namespace {

api_limits limits() { return tandem::testing::default_model_limits(); }

api_request parse(std::string_view body, api_kind kind = api_kind::chat) {
  return parse_api_request(parse_json_body(body), kind, limits());
}

// The error for `body`: its status, field and message.
api_error error_of(std::string_view body, api_kind kind = api_kind::chat) {
  try {
    parse(body, kind);
  } catch (const api_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return api_error(0, "");
}

}  // namespace

TEST(OpenAiRequest, AChatBodyBecomesTheRuntimeRequest) {
  const auto r = parse(R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
      "max_tokens": 32, "temperature": 0.7, "top_p": 0.95, "top_k": 40, "seed": 7, "n": 2, "stream": true,
      "stream_options": {"include_usage": true}, "stop": "END", "logprobs": true, "top_logprobs": 3,
      "user": "u1"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.gen.messages.size(), 2u);
  EXPECT_EQ(r.gen.messages[0].role, "system");
  EXPECT_EQ(r.gen.messages[1].content, "Hi there") << "text parts are joined";
  EXPECT_EQ(r.gen.max_tokens, 32u);
  EXPECT_FLOAT_EQ(r.gen.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(r.gen.sampling.top_p, 0.95f);
  EXPECT_EQ(r.gen.sampling.top_k, 40);
  EXPECT_EQ(r.gen.sampling.seed, 7);
  EXPECT_EQ(r.n, 2u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.gen.stop, (std::vector<std::string>{"END"}));
  EXPECT_TRUE(r.gen.sampling.logprobs);
  EXPECT_EQ(r.gen.sampling.top_logprobs, 3);
  EXPECT_EQ(r.user, "u1");
}

TEST(OpenAiRequest, DefaultsFollowOpenAi) {
  const auto chat = parse(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(chat.gen.max_tokens, 8192u) << "chat: up to the context";
  EXPECT_FLOAT_EQ(chat.gen.sampling.temperature, 1.0f);
  EXPECT_EQ(chat.n, 1u);
  EXPECT_FALSE(chat.stream);
  const auto completion = parse(R"({"prompt": "Once"})", api_kind::completion);
  EXPECT_EQ(completion.gen.prompt, "Once");
  EXPECT_EQ(completion.gen.max_tokens, 16u) << "completions: 16, as OpenAI's legacy endpoint";
  // Completions count alternatives with logprobs itself.
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 2})", api_kind::completion).gen.sampling.top_logprobs, 2);
}

TEST(OpenAiRequest, BadValuesNameTheFieldAndReadAsWritten) {
  auto e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": 3})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "temperature");
  EXPECT_NE(std::string(e.what()).find("'temperature' must be between 0 and 2 (got 3)"), std::string::npos) << e.what();
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "top_p": 1.5})");
  EXPECT_NE(std::string(e.what()).find("between 0 and 1 (got 1.5)"), std::string::npos) << e.what();
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "presence_penalty": -2.25})");
  EXPECT_NE(std::string(e.what()).find("between -2 and 2 (got -2.25)"), std::string::npos) << e.what();
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "top_p": 0})");
  EXPECT_EQ(e.param, "top_p");
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 9000})");
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_NE(std::string(e.what()).find("between 1 and 8192 (got 9000)"), std::string::npos) << e.what();
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "n": 17})");
  EXPECT_EQ(e.param, "n");
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": "hot"})");
  EXPECT_NE(std::string(e.what()).find("must be a number"), std::string::npos);
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "top_logprobs": 2})");
  EXPECT_EQ(e.param, "top_logprobs");
  e = error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "stream_options": {"include_usage": true}})");
  EXPECT_EQ(e.param, "stream_options");
  e = error_of(R"({"prompt": "x", "logprobs": true})", api_kind::completion);
  EXPECT_EQ(e.param, "logprobs");
}

TEST(OpenAiRequest, MessagesAreChecked) {
  EXPECT_EQ(error_of(R"({"messages": []})").param, "messages");
  EXPECT_EQ(error_of(R"({})").param, "messages");
  auto e = error_of(R"({"messages": [{"role": "wizard", "content": "Hi"}]})");
  EXPECT_NE(std::string(e.what()).find("got 'wizard'"), std::string::npos) << e.what();
  EXPECT_EQ(error_of(R"({"messages": ["Hi"]})").status, 400);
  EXPECT_EQ(error_of(R"({"prompt": ["a", "b"]})", api_kind::completion).param, "prompt");
}

TEST(OpenAiRequest, APromptMayBeTokenIds) {
  EXPECT_EQ(parse(R"({"prompt": [1, 2, 3]})", api_kind::completion).gen.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  const auto nested = parse(R"({"prompt": [[7, 8]], "echo": true, "max_tokens": 0})", api_kind::completion);
  EXPECT_EQ(nested.gen.prompt_tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(nested.gen.prompt.empty());
  EXPECT_TRUE(nested.echo);
  EXPECT_EQ(nested.gen.max_tokens, 0u);
  EXPECT_EQ(error_of(R"({"prompt": [49152]})", api_kind::completion).param, "prompt[0]");
  EXPECT_EQ(error_of(R"({"prompt": [[1], [2]]})", api_kind::completion).param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [1.5]})", api_kind::completion).param, "prompt[0]");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 0})", api_kind::completion).param, "max_tokens");
}

TEST(OpenAiRequest, TokenIdsAreInTheVocabulary) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "logit_bias": {"49152": 1}})").param,
            "logit_bias");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "Hi"}], "stop_token_ids": [-1]})").param,
            "stop_token_ids");
  const auto r = parse(R"({"messages": [{"role": "user", "content": "Hi"}], "logit_bias": {"42": -100}})");
  EXPECT_EQ(r.gen.sampling.logit_bias_ids, (std::vector<int32_t>{42}));
  EXPECT_EQ(r.gen.sampling.logit_bias_values, (std::vector<float>{-100}));
}

TEST(OpenAiRequest, BodiesThatAreNotJsonObjects) {
  EXPECT_THROW(parse_json_body("{"), api_error);
  EXPECT_THROW(parse_json_body("[1, 2]"), api_error);
  EXPECT_THROW(parse_json_body(""), api_error);
}

TEST(FormatNumber, ReadsAsWritten) {
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(-0.0), "0");
  EXPECT_EQ(format_number(2), "2");
  EXPECT_EQ(format_number(0.95), "0.95");
  EXPECT_EQ(format_number(-2.25), "-2.25");
  EXPECT_EQ(format_number(1e30), "1e+30");
}
