// gpt-oss's harmony replies (engine/chat/harmony_parser.h) through the chat output parser:
// whole, byte by byte, split at every byte and in random pieces, every way must give the same
// reasoning, content and calls (reply_parse_support.h).
#include <gtest/gtest.h>

#include "reply_parse_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// A template with harmony's markers: detected as the harmony family.
const chat_template& harmony_template() {
  static const chat_template t = chat_template::from_source(
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
      "{% if add_generation_prompt %}<|start|>assistant{% endif %}<|channel|>");
  return t;
}

chat_output_options options(bool tools, bool reasoning = true) {
  chat_output_options o;
  o.parse_tool_calls = tools;
  o.parse_reasoning = reasoning;
  return o;
}

constexpr std::string_view kPrompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant";

}  // namespace

TEST(harmony_parser, the_template_family_and_syntax) {
  EXPECT_EQ(harmony_template().name(), "harmony");
  EXPECT_EQ(tool_call_parser::syntax_for(harmony_template()), tool_call_parser::syntax::harmony);
  EXPECT_TRUE(chat_output_parser::wanted(harmony_template(), options(false)));
  EXPECT_EQ(harmony_template().stop_strings(), (std::vector<std::string>{"<|return|>", "<|call|>"}));
}

TEST(harmony_parser, analysis_then_final) {
  expect_parse(harmony_template(), kPrompt, options(false),
               "<|channel|>analysis<|message|>They greet me.<|end|><|start|>assistant<|channel|>final<|message|>"
               "Hello there!",
               {"They greet me.", "Hello there!", {}});
}

TEST(harmony_parser, one_call_with_constrain_and_reasoning) {
  expect_parse(harmony_template(), kPrompt, options(true),
               "<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": [1, 2]}",
               {"Use the tool.", "", {{"call_0", "get_weather", R"({"city": "Paris", "days": [1, 2]})"}}});
}

TEST(harmony_parser, two_calls_the_recipient_before_the_channel) {
  expect_parse(harmony_template(), kPrompt, options(true),
               "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\": 1}<|end|>"
               "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{\"y\": \"<|end|>\"}",
               {"", "", {{"call_0", "a", R"({"x": 1})"}, {"call_1", "b", R"({"y": "<|end|>"})"}}});
}

TEST(harmony_parser, calls_and_builtin_tools_are_dropped_when_not_asked_for) {
  // Tools off: a function call's message is dropped, never content; so is a built-in tool's.
  expect_parse(harmony_template(), kPrompt, options(false),
               "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
               {"Look it up.", "", {}});
  expect_parse(harmony_template(), kPrompt, options(true),
               "<|channel|>analysis to=browser.search<|message|>{\"query\": \"x\"}<|end|>"
               "<|start|>assistant<|channel|>final<|message|>Done.",
               {"", "Done.", {}});
}

TEST(harmony_parser, without_reasoning_parsing_the_analysis_stays_content) {
  const std::string reply = "<|channel|>analysis<|message|>Hmm.<|end|>";
  const result r = run(harmony_template(), kPrompt, options(false, false), {reply});
  EXPECT_EQ(r.reasoning, "");
  EXPECT_NE(r.content.find("Hmm."), std::string::npos);
}

TEST(harmony_parser, text_without_a_header_is_content) {
  expect_parse(harmony_template(), kPrompt, options(false), "Just text, no channel.",
               {"", "Just text, no channel.", {}});
}
