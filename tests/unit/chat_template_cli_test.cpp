// `tandem chat-template` with Jinja files: --template-file, --batch, --tools, --parse-output,
// and a template that does not parse (exit 1, the line named).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/cli_run.h"

namespace {

using tandem::testing::run;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

const char* kTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}{% for t in tools %}<tool>{{ t.function.name }}</tool>{% endfor %}<tool_call>{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

}  // namespace

TEST(chat_template_cli, template_file_batch_and_tools) {
  const std::string t = write_temp("tandem_cli_test.jinja", kTemplate);
  const auto one = run("chat-template --template-file " + t +
                       " --no-generation-prompt --messages '[{\"role\":\"user\",\"content\":\"Hi\"}]'");
  EXPECT_EQ(one.status, 0) << one.out;
  EXPECT_EQ(one.out, "<|im_start|>user\nHi<|im_end|>\n");
  const std::string cases = write_temp(
      "tandem_cli_test.jsonl",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"add_generation_prompt\": true}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}], \"tools\": [{\"type\": \"function\", \"function\": "
      "{\"name\": \"f\"}}]}\n"
      "{\"messages\": \"not a list\"}\n");
  const auto batch = run("chat-template --template-file " + t + " --batch < " + cases);
  EXPECT_EQ(batch.status, 0) << batch.out;
  EXPECT_EQ(batch.out,
            "{\"rendered\":\"<|im_start|>user\\na<|im_end|>\\n<|im_start|>assistant\\n\"}\n"
            "{\"rendered\":\"<|im_start|>user\\nb<|im_end|>\\n<tool>f</tool><tool_call><|im_start|>assistant\\n\"}\n"
            "{\"error\":\"messages must be a JSON array of {\\\"role\\\", \\\"content\\\"} objects\"}\n");
  const auto parsed = run("chat-template --template-file " + t +
                          " --messages '[{\"role\":\"user\",\"content\":\"Hi\"}]' --tools '[{\"type\":\"function\","
                          "\"function\":{\"name\":\"f\"}}]' --parse-output 'ok<tool_call>{\"name\": \"f\", "
                          "\"arguments\": {\"x\": 1}}</tool_call>'");
  EXPECT_EQ(parsed.status, 0) << parsed.out;
  EXPECT_NE(parsed.out.find("\"content\":\"ok\""), std::string::npos) << parsed.out;
  EXPECT_NE(parsed.out.find("\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\""), std::string::npos) << parsed.out;
  std::filesystem::remove(t);
  std::filesystem::remove(cases);
}

TEST(chat_template_cli, bad_template_names_the_line) {
  const std::string t = write_temp("tandem_cli_bad.jinja", "ok\n{% for m in messages %}\n{{ m.content }\n");
  const auto r = run("chat-template --template-file " + t + " --messages '[]'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("line 3"), std::string::npos) << r.out;
  std::filesystem::remove(t);
}
