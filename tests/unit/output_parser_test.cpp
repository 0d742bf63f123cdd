// Tool-call and reasoning parsers fed fixed model outputs: whole, byte by byte, and split in
// two at every byte. Every way of feeding must give the same content, reasoning and calls, and
// the call deltas must have OpenAI's stream form (a call's first delta carries its id and
// name, later ones only argument text, indices in order).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "reply_parse_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

chat_output_options tools_on(std::optional<tool_call_parser::syntax> s = std::nullopt) {
  chat_output_options o;
  o.parse_tool_calls = true;
  o.tool_syntax = s;
  return o;
}

const chat_template& hermes_template() {
  static const chat_template t = chat_template::from_source(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if tools %}<tool_call>{% endif %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  return t;
}

const chat_template& qwen3_template() {
  static const chat_template t = chat_template::from_source(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if tools %}<tool_call></tool_call>{% endif %}<think></think>"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not "
      "enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}");
  return t;
}

}  // namespace

TEST(tool_call_parser, syntax_from_the_template) {
  EXPECT_EQ(tool_call_parser::syntax_for(hermes_template()), tool_call_parser::syntax::hermes);
  EXPECT_EQ(tool_call_parser::syntax_for(chat_template::from_source("[INST]{% if tools %}[TOOL_CALLS]{% endif %}")),
            tool_call_parser::syntax::mistral);
  EXPECT_EQ(tool_call_parser::syntax_for(
                chat_template::from_source("<|start_header_id|>{{ m }}<|end_header_id|>{{ '<|python_tag|>' }}")),
            tool_call_parser::syntax::llama3);
  EXPECT_EQ(tool_call_parser::syntax_for(chat_template::from_source("{{ messages }}")),
            tool_call_parser::syntax::generic);
  EXPECT_EQ(tool_call_parser::syntax_named("mistral"), tool_call_parser::syntax::mistral);
  EXPECT_THROW((void)tool_call_parser::syntax_named("nope"), std::invalid_argument);
}

TEST(tool_call_parser, hermes_calls_between_content) {
  const auto& t = hermes_template();
  expect_parse(
      t, "", tools_on(),
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\", \"n\": [1, 2.5]}}\n"
      "</tool_call>",
      {"",
       "Let me check.\n",
       {{"call_0", "get_weather", "{\"city\": \"Paris\"}"},
        {"call_1", "get_time", "{\"tz\": \"CET\", \"n\": [1, 2.5]}"}}});
  // Arguments before the name, arguments as a JSON string, no arguments at all.
  expect_parse(
      t, "", tools_on(),
      "<tool_call>{\"arguments\": {\"q\": \"}{\\\"\"}, \"name\": \"search\"}</tool_call>"
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>"
      "<tool_call>{\"name\": \"now\"}</tool_call>",
      {"", "", {{"call_0", "search", "{\"q\": \"}{\\\"\"}"}, {"call_1", "f", "{\"x\": 1}"}, {"call_2", "now", "{}"}}});
  // Plain replies, tags in prose, and a block that is no call stay content.
  expect_parse(t, "", tools_on(), "The weather is fine. Use <b>bold</b>.",
               {"", "The weather is fine. Use <b>bold</b>.", {}});
  expect_parse(t, "", tools_on(), "a <tool_call>not json</tool_call> b",
               {"", "a <tool_call>not json</tool_call> b", {}});
  // A call cut off by the token limit keeps what it has.
  expect_parse(t, "", tools_on(), "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"unfinish",
               {"", "", {{"call_0", "f", "{\"a\": \"unfinish"}}});
}

TEST(tool_call_parser, llama3_json_reply) {
  const auto t = chat_template::from_source("<|start_header_id|>x<|end_header_id|>");
  expect_parse(t, "", tools_on(),
               "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
               {"", "", {{"call_0", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}});
  expect_parse(t, "", tools_on(),
               "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": true}}",
               {"", "", {{"call_0", "a", "{}"}, {"call_1", "b", "{\"k\": true}"}}});
  expect_parse(t, "", tools_on(), "  \n{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"x\": null}}",
               {"", "", {{"call_0", "f", "{\"x\": null}"}}});
  // Prose, and JSON that is no call, are content as they came.
  expect_parse(t, "", tools_on(), "It is sunny in {city}.", {"", "It is sunny in {city}.", {}});
  expect_parse(t, "", tools_on(), "{\"answer\": 42}", {"", "{\"answer\": 42}", {}});
}

TEST(tool_call_parser, mistral_both_forms) {
  const auto t = chat_template::from_source("[INST]{{ '[TOOL_CALLS]' }}");
  expect_parse(t, "", tools_on(),
               "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
               "{\"name\": \"get_time\", \"arguments\": {}}]",
               {"", "", {{"call_0", "get_weather", "{\"city\": \"Paris\"}"}, {"call_1", "get_time", "{}"}}});
  expect_parse(t, "", tools_on(),
               "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{}",
               {"", "Sure.", {{"call_0", "get_weather", "{\"city\": \"Rome\"}"}, {"abc123XYZ", "f", "{}"}}});
  expect_parse(t, "", tools_on(), "No tools needed: [INST] is a tag.", {"", "No tools needed: [INST] is a tag.", {}});
}

TEST(tool_call_parser, generic_accepts_every_form) {
  const auto t = chat_template::from_source("{{ messages }}");
  const auto o = tools_on();
  expect_parse(t, "", o, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", {"", "", {{"call_0", "f", "{\"a\": 1}"}}});
  expect_parse(t, "", o, "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"b\": [2]}}]",
               {"", "", {{"call_0", "f", "{}"}, {"call_1", "g", "{\"b\": [2]}"}}});
  expect_parse(t, "", o, "ok <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
               {"", "ok ", {{"call_0", "f", "{}"}}});
  expect_parse(t, "", o, "x[TOOL_CALLS]f[ARGS]{\"q\": \"é\"}", {"", "x", {{"call_0", "f", "{\"q\": \"é\"}"}}});
  expect_parse(t, "", o, "Hello there!", {"", "Hello there!", {}});
}

TEST(reasoning_parser, think_sections) {
  const auto& t = qwen3_template();
  chat_output_options o;
  expect_parse(t, "", o, "<think>\nTwo plus two.\nIt is four.\n</think>\n\nIt is 4.",
               {"Two plus two.\nIt is four.", "It is 4.", {}});
  // No section: all content, untouched.
  expect_parse(t, "", o, "  Just an answer <think> inline.", {"", "  Just an answer <think> inline.", {}});
  // Never closed (token limit): all reasoning.
  expect_parse(t, "", o, "<think>still thinking", {"still thinking", "", {}});
  // The prompt opened the section (DeepSeek-R1): the output starts inside it.
  expect_parse(t, "<|im_start|>assistant\n<think>\n", o, "reasoning here</think>answer",
               {"reasoning here", "answer", {}});
  // Qwen3 with thinking off closes it in the prompt: all content.
  expect_parse(t, "<|im_start|>assistant\n<think>\n\n</think>\n\n", o, "<b>answer</b>", {"", "<b>answer</b>", {}});
  // Turned off: the tags are content.
  chat_output_options off;
  off.parse_reasoning = false;
  expect_parse(t, "", off, "<think>x</think>y", {"", "<think>x</think>y", {}});
}

TEST(reasoning_parser, reasoning_then_tool_calls) {
  const auto& t = qwen3_template();
  expect_parse(
      t, "", tools_on(),
      "<think>\nI should call the tool. <tool_call> is how.\n</think>\n\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
      {"I should call the tool. <tool_call> is how.", "", {{"call_0", "get_weather", "{\"city\": \"Paris\"}"}}});
}

TEST(reasoning_parser, budget_hooks) {
  const auto& t = qwen3_template();
  chat_output_parser p(t, "", {});
  EXPECT_FALSE(p.in_reasoning());
  (void)p.feed("<think>hmm");
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_EQ(p.reasoning_close_text(), "</think>\n\n");
  (void)p.feed(p.reasoning_close_text());
  (void)p.feed("done");
  EXPECT_FALSE(p.in_reasoning());
  (void)p.finish();
  EXPECT_EQ(p.reasoning_content(), "hmm");
  EXPECT_EQ(p.content(), "done");
  // A template without thinking tags has no reasoning parser.
  chat_output_parser none(hermes_template(), "", {});
  (void)none.feed("<think>x</think>");
  (void)none.finish();
  EXPECT_EQ(none.content(), "<think>x</think>");
}

TEST(tool_call_parser, bounded) {
  tool_call_parser p(tool_call_parser::syntax::hermes);
  (void)p.feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"");
  EXPECT_THROW(
      {
        for (int i = 0; i < 2000; ++i) (void)p.feed(std::string(1024, 'x'));
      },
      std::runtime_error);
}

TEST(tool_call_parser, edges_of_content) {
  const auto& t = hermes_template();
  // A partial marker at the end is content; content after a call is content; whitespace
  // between calls is not.
  expect_parse(t, "", tools_on(), "Ends with <tool_c", {"", "Ends with <tool_c", {}});
  expect_parse(t, "", tools_on(),
               "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"日本\"}}</tool_call>\n\n"
               "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>\nDone.",
               {"", "\nDone.", {{"call_0", "f", "{\"s\": \"日本\"}"}, {"call_1", "g", "{}"}}});
}

// The templates of published models pick their parsers (when `make test-data` fetched them).
TEST(output_parser, corpus_templates_pick_their_syntax) {
  const char* home = std::getenv("TANDEM_HOME");
  const std::string dir =
      (home ? std::string(home) : std::string(std::getenv("HOME")) + "/.cache/tandem") + "/chat-templates/";
  if (!std::filesystem::exists(dir + "Qwen-Qwen3-0.6B.jinja")) GTEST_SKIP() << "no chat templates: make test-data";
  const auto load = [&](const char* name) { return chat_template::from_file(dir + name, "<s>", "</s>"); };
  const auto qwen3 = load("Qwen-Qwen3-0.6B.jinja");
  EXPECT_EQ(tool_call_parser::syntax_for(qwen3), tool_call_parser::syntax::hermes);
  ASSERT_TRUE(reasoning_parser::syntax_for(qwen3));
  EXPECT_TRUE(qwen3.supports_tools());
  const std::vector<chat_message> msgs = {{"user", "hi"}};
  chat_render_options no_think;
  no_think.template_kwargs_json = R"({"enable_thinking": false})";
  EXPECT_FALSE(reasoning_parser::prompt_opens(*reasoning_parser::syntax_for(qwen3), qwen3.render(msgs, no_think)));
  EXPECT_EQ(tool_call_parser::syntax_for(load("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja")),
            tool_call_parser::syntax::hermes);
  EXPECT_EQ(tool_call_parser::syntax_for(load("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            tool_call_parser::syntax::llama3);
  EXPECT_EQ(tool_call_parser::syntax_for(load("mistralai-Mistral-Nemo-Instruct-2407.jinja")),
            tool_call_parser::syntax::mistral);
  const auto r1 = load("llama-cpp-deepseek-r1.jinja");
  ASSERT_TRUE(reasoning_parser::syntax_for(r1));
  const std::string prompt = r1.render(msgs, true);
  EXPECT_TRUE(reasoning_parser::prompt_opens(*reasoning_parser::syntax_for(r1), prompt)) << prompt;
  expect_parse(r1, prompt, {}, "The user greets.\n</think>\n\nHello!", {"The user greets.", "Hello!", {}});
}
