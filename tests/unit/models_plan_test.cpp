// The model supervisor's plain decisions (models/model_plan.h) and its configuration
// (models/model_spec.h): which model a request names, what makes room for a load under the
// memory budget (least recently used first, never a model in use or pinned), keep_alive.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "models/model_plan.h"
#include "models/model_spec.h"

namespace tandem {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::seconds;

model_slot loaded(uint64_t bytes, clock::time_point last, uint32_t in_use = 0, bool pinned = false) {
  model_slot s;
  s.state = model_state::loaded;
  s.bytes = bytes;
  s.last_use = last;
  s.in_use = in_use;
  s.pinned = pinned;
  return s;
}

model_slot unloaded(uint64_t bytes) {
  model_slot s;
  s.bytes = bytes;
  return s;
}

TEST(ModelPlan, FindsNamesAliasesAdaptersAndTheDefault) {
  std::vector<model_spec> specs(2);
  specs[0].name = "small";
  specs[1].name = "large";
  specs[1].aliases = {"gpt-4o", "big"};
  EXPECT_EQ(find_model(specs, "small", 0), 0);
  EXPECT_EQ(find_model(specs, "big", 0), 1);
  EXPECT_EQ(find_model(specs, "gpt-4o", 0), 1);
  EXPECT_EQ(find_model(specs, "large:sql-adapter", 0), 1);
  EXPECT_EQ(find_model(specs, "big:x", 0), 1);
  EXPECT_EQ(find_model(specs, "", 1), 1);
  EXPECT_EQ(find_model(specs, "medium", 0), -1);
  EXPECT_EQ(find_model(specs, ":small", 0), -1);
  EXPECT_EQ(find_model(specs, "smal", 0), -1);
}

TEST(ModelPlan, TenantsModels) {
  EXPECT_TRUE(model_allowed({}, "a"));
  EXPECT_TRUE(model_allowed({"a", "b"}, "b"));
  EXPECT_FALSE(model_allowed({"a"}, "b"));
}

TEST(ModelPlan, FitsWithoutUnloading) {
  const auto t = clock::now();
  const std::vector<model_slot> s{loaded(100, t, 0, true), unloaded(50), loaded(30, t)};
  const room_plan p = plan_room(s, 1, 50, 200);
  EXPECT_TRUE(p.fits_now);
  EXPECT_TRUE(p.unload.empty());
  EXPECT_EQ(accounted_bytes(s), 130u);
}

TEST(ModelPlan, UnloadsLeastRecentlyUsedIdleFirstAndOnlyAsMuchAsNeeded) {
  const auto t = clock::now();
  // 0 pinned; 1, 2, 3 idle (2 the oldest, then 3, then 1); 4 to load.
  const std::vector<model_slot> s{loaded(100, t, 0, true), loaded(50, t - seconds(1)), loaded(50, t - seconds(30)),
                                  loaded(50, t - seconds(10)), unloaded(50)};
  room_plan p = plan_room(s, 4, 50, 260);  // 250 + 50 > 260: one must go
  EXPECT_FALSE(p.fits_now);
  EXPECT_FALSE(p.never);
  EXPECT_EQ(p.unload, (std::vector<size_t>{2}));
  p = plan_room(s, 4, 50, 210);  // two must go: 2, then 3
  EXPECT_EQ(p.unload, (std::vector<size_t>{2, 3}));
}

TEST(ModelPlan, NeverUnloadsAModelInUseOrPinned) {
  const auto t = clock::now();
  const std::vector<model_slot> s{loaded(100, t - seconds(100), 0, true), loaded(50, t - seconds(50), 1), loaded(50, t),
                                  unloaded(50)};
  room_plan p = plan_room(s, 3, 50, 200);  // 250 > 200: the idle one (2) goes, not the older busy one
  EXPECT_EQ(p.unload, (std::vector<size_t>{2}));
  p = plan_room(s, 3, 50, 150);  // would need the busy one too: unload nothing, wait
  EXPECT_FALSE(p.fits_now);
  EXPECT_FALSE(p.never);
  EXPECT_TRUE(p.unload.empty());
}

TEST(ModelPlan, TooLargeForTheBudgetIsNever) {
  const auto t = clock::now();
  const std::vector<model_slot> s{loaded(100, t, 0, true), loaded(50, t), unloaded(150)};
  const room_plan p = plan_room(s, 2, 150, 200);  // 100 pinned + 150 > 200, whatever is unloaded
  EXPECT_TRUE(p.never);
  EXPECT_TRUE(p.unload.empty());
}

TEST(ModelPlan, UnloadsUnderWayCountUntilGone) {
  const auto t = clock::now();
  std::vector<model_slot> s{loaded(100, t, 0, true), loaded(50, t), unloaded(50)};
  s[1].state = model_state::unloading;
  // 150 counted + 50 > 180: the unload under way makes room, so nothing more goes; wait.
  room_plan p = plan_room(s, 2, 50, 180);
  EXPECT_FALSE(p.fits_now);
  EXPECT_TRUE(p.unload.empty());
  EXPECT_FALSE(p.never);
  s[1].state = model_state::unloaded;
  p = plan_room(s, 2, 50, 180);
  EXPECT_TRUE(p.fits_now);
  // A loading model counts too.
  s[1].state = model_state::loading;
  EXPECT_EQ(accounted_bytes(s), 150u);
}

TEST(ModelPlan, KeepAliveExpiry) {
  const auto now = clock::now();
  std::vector<model_slot> s{loaded(1, now - seconds(10)), loaded(1, now - seconds(2)), loaded(1, now - seconds(99), 1),
                            loaded(1, now - seconds(99), 0, true), loaded(1, now - seconds(99))};
  for (auto& x : s) x.keep_alive_s = 5;
  s[4].keep_alive_s = -1;  // forever
  EXPECT_EQ(expired(s, now), (std::vector<size_t>{0}));
  s[1].keep_alive_s = 0;  // unload as soon as idle
  EXPECT_EQ(expired(s, now), (std::vector<size_t>{0, 1}));
}

TEST(ModelSpec, ArgumentsAndKeepAlive) {
  EXPECT_FALSE(parse_model_arg("/models/a.gguf"));
  const auto s = parse_model_arg("qwen-7b=/models/q=1.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "qwen-7b");
  EXPECT_EQ(s->path, "/models/q=1.gguf");
  EXPECT_THROW(parse_model_arg("=x.gguf"), std::runtime_error);
  EXPECT_THROW(parse_model_arg("a b=x.gguf"), std::runtime_error);
  EXPECT_THROW(parse_model_arg("a:b=x.gguf"), std::runtime_error);  // ':' splits NAME:ADAPTER
  EXPECT_THROW(parse_model_arg("a="), std::runtime_error);
  EXPECT_DOUBLE_EQ(parse_keep_alive("30", "k"), 30);
  EXPECT_DOUBLE_EQ(parse_keep_alive("30s", "k"), 30);
  EXPECT_DOUBLE_EQ(parse_keep_alive("5m", "k"), 300);
  EXPECT_DOUBLE_EQ(parse_keep_alive("1.5h", "k"), 5400);
  EXPECT_DOUBLE_EQ(parse_keep_alive("-1", "k"), -1);
  EXPECT_THROW(parse_keep_alive("5 minutes", "k"), std::runtime_error);
  EXPECT_THROW(parse_keep_alive("", "k"), std::runtime_error);
}

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/models_spec_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  std::ofstream(name) << text;
  return name;
}

TEST(ModelSpec, YamlListAndItsErrors) {
  const std::string ok = write_temp(
      "models:\n"
      "  - name: small\n    path: /m/s.gguf\n    aliases: [s, tiny]\n    keep_alive: 2m\n    max_num_seqs: 8\n"
      "  - name: large\n    path: /m/l.gguf\n    kv_cache_share: 0.5\n    default: true\n    chat_template: chatml\n");
  const auto m = load_models_yaml(ok);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].aliases, (std::vector<std::string>{"s", "tiny"}));
  EXPECT_DOUBLE_EQ(*m[0].keep_alive_s, 120);
  EXPECT_EQ(*m[0].max_num_seqs, 8u);
  EXPECT_TRUE(m[1].is_default);
  EXPECT_DOUBLE_EQ(*m[1].kv_cache_share, 0.5);
  EXPECT_EQ(m[0].chat_template, "");  // unset: the server's --chat-template
  EXPECT_EQ(m[1].chat_template, "chatml");
  std::remove(ok.c_str());
  for (const char* bad : {"models:\n  - name: a\n",                                         // no path
                          "models:\n  - name: a\n    path: x\n  - name: a\n    path: y\n",  // twice
                          "models:\n  - name: a\n    path: x\n    aliases: [b]\n  - name: b\n    path: y\n",
                          "models:\n  - name: a\n    path: x\n    colour: red\n",  // unknown field
                          "models:\n  - name: a\n    path: x\n    max_num_seqs: 0\n",
                          "models:\n  - name: a\n    path: x\n    kv_cache_share: 2\n",
                          "models:\n  - name: a\n    path: x\n    keep_alive: soon\n", "models: []\n",
                          "models:\n  - name: a\n    path: x\n    chat_template: /no/such/file.jinja\n",
                          "models:\n  - name: a\n    path: x\n    chat_template: [a]\n"}) {
    const std::string f = write_temp(bad);
    EXPECT_THROW(load_models_yaml(f), std::runtime_error) << bad;
    std::remove(f.c_str());
  }
}

}  // namespace
}  // namespace tandem
