// The guard model's plain parts (net/guard.h): its reply read into a verdict, the text an
// input is judged by, the conversation an output check shows, OpenAI's names for the hazard
// codes, and the tenant's guard in the tenants file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "engine/tenants/tenant_limits.h"
#include "net/guard.h"
#include "tandem/api.h"

namespace tandem::net {
namespace {

TEST(GuardReply, SafeAndUnsafeWithCategories) {
  EXPECT_FALSE(read_guard_reply("safe").flagged);
  EXPECT_FALSE(read_guard_reply("\nsafe").flagged);
  const auto one = read_guard_reply("unsafe\nS3");
  EXPECT_TRUE(one.flagged);
  EXPECT_EQ(one.categories, (std::vector<std::string>{"S3"}));
  const auto two = read_guard_reply("unsafe\nS1,S10");
  EXPECT_EQ(two.categories, (std::vector<std::string>{"S1", "S10"}));
  EXPECT_EQ(read_guard_reply("unsafe\nS8,S8").categories, (std::vector<std::string>{"S8"}));
  EXPECT_TRUE(read_guard_reply("unsafe").flagged);
  EXPECT_TRUE(read_guard_reply("unsafe").categories.empty());
}

TEST(GuardReply, InputText) {
  generate_request one;
  one.messages.push_back({"user", "hello"});
  EXPECT_EQ(guard_input_text(one), "hello");
  generate_request two;
  two.messages.push_back({"system", "be kind"});
  two.messages.push_back({"user", "hi"});
  EXPECT_EQ(guard_input_text(two), "system: be kind\nuser: hi\n");
  generate_request raw;
  raw.prompt = "once upon";
  EXPECT_EQ(guard_input_text(raw), "once upon");
}

TEST(GuardReply, OutputConversation) {
  // The user's and assistant's turns go to the guard (the reply follows them); the
  // application's system and tool turns do not.
  generate_request chat;
  chat.messages.push_back({"system", "be kind"});
  chat.messages.push_back({"user", "hi"});
  chat.messages.push_back({"assistant", "hello"});
  chat.messages.push_back({"tool", "{}"});
  chat.messages.push_back({"user", "and now?"});
  const auto c = guard_conversation(chat);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].role, "user");
  EXPECT_EQ(c[0].content, "hi");
  EXPECT_EQ(c[1].role, "assistant");
  EXPECT_EQ(c[2].content, "and now?");
  generate_request raw;
  raw.prompt = "once upon";
  const auto r = guard_conversation(raw);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].role, "user");
  EXPECT_EQ(r[0].content, "once upon");
}

TEST(GuardReply, OpenAiModerationCategories) {
  EXPECT_EQ(openai_moderation_category("S1"), "violence");
  EXPECT_EQ(openai_moderation_category("S2"), "illicit");
  EXPECT_EQ(openai_moderation_category("S4"), "sexual/minors");
  EXPECT_EQ(openai_moderation_category("S9"), "illicit/violent");
  EXPECT_EQ(openai_moderation_category("S10"), "hate");
  EXPECT_EQ(openai_moderation_category("S11"), "self-harm");
  EXPECT_EQ(openai_moderation_category("S12"), "sexual");
  for (const char* none : {"S3", "S5", "S6", "S7", "S8", "S13", "S14", "S15", ""}) {
    EXPECT_EQ(openai_moderation_category(none), "") << none;
  }
}

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/guard_tenants_XXXXXX";
  EXPECT_GE(mkstemp(name), 0);
  std::ofstream(name) << text;
  return name;
}

TEST(GuardReply, TenantsFile) {
  const std::string f = write_temp(
      "tenants:\n  - name: a\n    api_keys: [k1]\n    guard: {model: g, check: [output], every: 16}\n"
      "  - name: b\n    api_keys: [k2]\n    guard: {model: g}\n    models: [x, y]\n");
  const auto t = load_tenants_yaml(f);
  std::remove(f.c_str());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].guard.model, "g");
  EXPECT_FALSE(t[0].guard.input);
  EXPECT_TRUE(t[0].guard.output);
  EXPECT_EQ(t[0].guard.every, 16u);
  EXPECT_TRUE(t[1].guard.input && t[1].guard.output);  // check defaults to both
  EXPECT_EQ(t[1].models, (std::vector<std::string>{"x", "y"}));
  for (const char* bad : {"tenants:\n  - name: a\n    api_keys: [k]\n    guard: g\n",
                          "tenants:\n  - name: a\n    api_keys: [k]\n    guard: {model: g, check: [everything]}\n",
                          "tenants:\n  - name: a\n    api_keys: [k]\n    guard: {model: g, every: -3}\n",
                          "tenants:\n  - name: a\n    api_keys: [k]\n    guard: {model: g, colour: red}\n",
                          "tenants:\n  - name: a\n    api_keys: [k]\n    models: x\n"}) {
    const std::string p = write_temp(bad);
    EXPECT_THROW(load_tenants_yaml(p), std::runtime_error) << bad;
    std::remove(p.c_str());
  }
}

}  // namespace
}  // namespace tandem::net
