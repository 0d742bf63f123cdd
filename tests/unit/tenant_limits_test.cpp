// The tenants' plain C++ (engine/tenants/tenant_limits.h): the YAML loader's checks, the
// constant-time key comparison and the token bucket, with time passed in (no sleeping).
#include "engine/tenants/tenant_limits.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace tandem;
using namespace std::chrono_literals;

namespace {

class TenantsFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("tandem-tenants-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  // The loader's error for `text`, or "" when it loads.
  std::string error_of(const std::string& text) {
    try {
      load_tenants_yaml(write(text));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path path_;
};

constexpr int32_t kBatchPriorityForTest = 1 << 20;  // tandem::kBatchPriority

}  // namespace

TEST_F(TenantsFile, LoadsEveryField) {
  const auto t = load_tenants_yaml(write(R"(tenants:
  - name: alice
    api_keys: [sk-alice-1, sk-alice-2]
    requests_per_minute: 60
    tokens_per_minute: 20000
    max_concurrent_requests: 4
    weight: 2
    prefix_cache_group: shared
    kv_cache_share: 0.25
  - name: bob
    api_keys: [sk-bob]
)"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "alice");
  EXPECT_EQ(t[0].api_keys, (std::vector<std::string>{"sk-alice-1", "sk-alice-2"}));
  EXPECT_EQ(t[0].requests_per_minute, 60);
  EXPECT_EQ(t[0].tokens_per_minute, 20000);
  EXPECT_EQ(t[0].max_concurrent, 4u);
  EXPECT_EQ(t[0].weight, 2);
  EXPECT_EQ(t[1].requests_per_minute, 0) << "no limit unless given";
  EXPECT_EQ(t[1].weight, 1);
  EXPECT_EQ(t[0].prefix_cache_group, "shared");
  EXPECT_EQ(t[0].kv_cache_share, 0.25);
  EXPECT_EQ(t[1].kv_cache_share, 1.0) << "the whole cache unless given";
}

// A tenant's priority is added to its requests' (lower runs first); max_priority bounds how
// urgent they may ask to be, by default the tenant's own priority.
TEST_F(TenantsFile, PrioritiesAreAddedAndBounded) {
  const auto t = load_tenants_yaml(write(R"(tenants:
  - {name: premium, api_keys: [p], priority: -5, max_priority: -10}
  - {name: plain, api_keys: [q]}
)"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].priority, -5);
  EXPECT_EQ(t[0].effective_priority(0), -5);
  EXPECT_EQ(t[0].effective_priority(-3), -8);
  EXPECT_EQ(t[0].effective_priority(-100), -10) << "held to max_priority";
  EXPECT_EQ(t[0].effective_priority(kBatchPriorityForTest), kBatchPriorityForTest - 5);
  EXPECT_EQ(t[1].effective_priority(0), 0);
  EXPECT_EQ(t[1].effective_priority(-7), 0) << "a client cannot jump its tenant's class unless allowed";
  EXPECT_EQ(t[1].effective_priority(4), 4) << "but may step back";
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], priority: 1.5}\n").find("'priority' must be a whole"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], max_priority: 1e9}\n").find("'max_priority'"),
            std::string::npos);
}

TEST_F(TenantsFile, RefusesWhatCannotBeServed) {
  EXPECT_NE(error_of("tenant: []\n").find("expected a top-level 'tenants' list"), std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - api_keys: [k]\n").find("every tenant needs a name"), std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - name: a\n").find("tenant 'a' has no api_keys"), std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k]}\n  - {name: a, api_keys: [j]}\n").find("appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k]}\n  - {name: b, api_keys: [k]}\n").find("used twice"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], weight: 0}\n").find("'weight' must be > 0"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], requests_per_minute: -1}\n")
                .find("'requests_per_minute' must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], kv_cache_share: 0}\n")
                .find("'kv_cache_share' must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], kv_cache_share: 1.5}\n").find("'kv_cache_share'"),
            std::string::npos);
  // A value that is not a number, or not a finite one, is named (not taken as the default).
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], weight: heavy}\n").find("'weight' must be a number"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], tokens_per_minute: .nan}\n")
                .find("'tokens_per_minute' must be a finite number"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], requests_per_minute: .inf}\n")
                .find("'requests_per_minute' must be a finite number"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: [k], max_concurrent_requests: 2.5}\n")
                .find("'max_concurrent_requests' must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("tenants:\n  - {name: a, api_keys: ['']}\n").find("empty API key"), std::string::npos);
}

TEST_F(TenantsFile, AMissingFileIsNamed) {
  try {
    load_tenants_yaml("/nonexistent/tenants.yaml");
    FAIL() << "loaded a file that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tenants.yaml"), std::string::npos) << e.what();
  }
}

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal("sk-abc", "sk-abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-abd"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-ab"));
  EXPECT_FALSE(constant_time_equal("sk-ab", "sk-abc"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  // A key that is a prefix padded with NULs is still a different key.
  EXPECT_FALSE(constant_time_equal(std::string_view("ab\0", 3), "ab"));
}

TEST(TokenBucket, TakesRefillsAndSettles) {
  const auto t0 = token_bucket::clock::time_point{} + 1h;
  token_bucket b(60, t0);  // 60 per minute: one per second
  ASSERT_TRUE(b.limited());
  EXPECT_TRUE(b.try_take(50, t0));
  EXPECT_FALSE(b.try_take(11, t0)) << "only 10 left";
  EXPECT_DOUBLE_EQ(b.level(t0), 10) << "a refused take takes nothing";
  EXPECT_DOUBLE_EQ(b.seconds_until(20, t0), 10);
  EXPECT_DOUBLE_EQ(b.level(t0 + 5s), 15);
  EXPECT_DOUBLE_EQ(b.level(t0 + 10min), 60) << "never above capacity";
  EXPECT_DOUBLE_EQ(b.seconds_until(1000, t0 + 10min), 0) << "capped at the capacity, which is there";
  // Settling a reservation: a request that cost 30 more than reserved drives the level below
  // zero; it refills from there.
  const auto t1 = t0 + 10min;
  EXPECT_TRUE(b.try_take(60, t1));
  b.adjust(30, t1);
  EXPECT_DOUBLE_EQ(b.level(t1), -30);
  EXPECT_FALSE(b.try_take(1, t1 + 30s));
  EXPECT_DOUBLE_EQ(b.level(t1 + 30s), 0);
  b.adjust(-100, t1 + 30s);  // gives back, but not past the capacity
  EXPECT_DOUBLE_EQ(b.level(t1 + 30s), 60);
  // Time that seems to go backwards changes nothing.
  EXPECT_DOUBLE_EQ(b.level(t0), 60);
}

TEST(TokenBucket, NoLimitAlwaysGives) {
  token_bucket open;
  EXPECT_FALSE(open.limited());
  EXPECT_TRUE(open.try_take(1e12, token_bucket::clock::now()));
  EXPECT_EQ(open.seconds_until(1e12, token_bucket::clock::now()), 0);
}
