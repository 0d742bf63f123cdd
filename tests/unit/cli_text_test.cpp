// The text subcommands of build/bin/tandem: tokenize, detokenize, chat-template (output,
// JSON, and errors: a message on stderr and exit status 1).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/model/model_path.h"
#include "tests/unit/cli_run.h"

namespace {

using tandem::testing::run;

bool have_default_model() {
  if (std::filesystem::exists(tandem::default_model_path())) return true;
  ADD_FAILURE() << tandem::default_model_path() << " is missing: run `make model` first";
  return false;
}

TEST(cli_text, tokenize_and_detokenize) {
  if (!have_default_model()) return;
  const auto table = run("tokenize --prompt 'Hello, world'");
  EXPECT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("'Hello'"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("3 tokens"), std::string::npos) << table.out;

  const auto json = run("tokenize --json 'Hi<|im_end|>'");
  EXPECT_EQ(json.status, 0) << json.out;
  EXPECT_EQ(json.out.find("\"control\":true"), std::string::npos) << "special text parsed without --parse-special";
  const auto special = run("tokenize --json --parse-special 'Hi<|im_end|>'");
  EXPECT_NE(special.out.find("\"ids\":[26843,2]"), std::string::npos) << special.out;

  const auto back = run("detokenize --ids 26843,2");
  EXPECT_EQ(back.status, 0);
  EXPECT_EQ(back.out, "Hi<|im_end|>\n");
  EXPECT_EQ(run("detokenize 26843 2 --no-special").out, "Hi\n");
}

TEST(cli_text, chat_template) {
  if (!have_default_model()) return;
  const auto r =
      run("chat-template --messages '[{\"role\":\"system\",\"content\":\"Be brief.\"},"
          "{\"role\":\"user\",\"content\":\"Hi\"}]'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const auto llama3 =
      run("chat-template --chat-template llama3 --no-generation-prompt "
          "--messages '[{\"role\":\"user\",\"content\":\" Hi \"}]'");
  EXPECT_NE(llama3.out.find("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"), std::string::npos)
      << llama3.out;
}

TEST(cli_text, errors_exit_1_with_a_message) {
  const auto missing = run("tokenize --model /nonexistent/model.gguf --prompt x");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("model file not found"), std::string::npos) << missing.out;
  if (!have_default_model()) return;
  const auto bad_json = run("chat-template --messages '[{\"role\": 1}]'");
  EXPECT_EQ(bad_json.status, 1);
  EXPECT_NE(bad_json.out.find("role"), std::string::npos) << bad_json.out;
  const auto bad_name = run("chat-template --chat-template nonesuch --messages '[]'");
  EXPECT_EQ(bad_name.status, 1);
  EXPECT_NE(bad_name.out.find("chatml"), std::string::npos) << bad_name.out;
  const auto bad_id = run("detokenize 99999999");
  EXPECT_EQ(bad_id.status, 1);
  EXPECT_NE(bad_id.out.find("outside the vocabulary"), std::string::npos) << bad_id.out;
}

}  // namespace
