#include "engine/tenants/tenant_limits.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

namespace tandem {

std::vector<tenant_config> load_tenants_yaml(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    throw std::runtime_error("tenants file " + path + ": " + e.what());
  }
  const auto fail = [&](const std::string& what) { throw std::runtime_error("tenants file " + path + ": " + what); };
  const YAML::Node list = root["tenants"];
  if (!list || !list.IsSequence()) fail("expected a top-level 'tenants' list");
  std::vector<tenant_config> out;
  for (const auto& n : list) {
    tenant_config t;
    // A field that is there must be what it says: yaml-cpp's as<T>(fallback) would turn
    // "weight: heavy" into the fallback without a word.
    const auto number = [&](const char* field, double fallback) {
      const YAML::Node v = n[field];
      if (!v) return fallback;
      double x = 0;
      try {
        x = v.as<double>();
      } catch (const YAML::Exception&) {
        fail("tenant '" + t.name + "': '" + field + "' must be a number (got '" + v.as<std::string>("?") + "')");
      }
      if (!std::isfinite(x)) fail("tenant '" + t.name + "': '" + field + "' must be a finite number");
      return x;
    };
    try {
      t.name = n["name"].as<std::string>("");
      if (t.name.empty()) fail("every tenant needs a name");
      t.prefix_cache_group = n["prefix_cache_group"].as<std::string>("");
      t.lora = n["lora"].as<std::string>("");
      if (const auto k = n["api_keys"]) {
        for (const auto& key : k) t.api_keys.push_back(key.as<std::string>());
      }
      if (const auto g = n["guard"]) {
        if (!g.IsMap() || !g["model"] || !g["model"].IsScalar() || g["model"].Scalar().empty()) {
          fail("tenant '" + t.name + "': 'guard' must be a map with a model (and check: [input, output], every: N)");
        }
        for (const auto& kv : g) {
          const std::string k = kv.first.as<std::string>("");
          if (k != "model" && k != "check" && k != "every")
            fail("tenant '" + t.name + "': guard: unknown field '" + k + "'");
        }
        t.guard.model = g["model"].Scalar();
        if (const auto c = g["check"]) {
          if (!c.IsSequence()) fail("tenant '" + t.name + "': guard: 'check' must be a list of input, output");
          for (const auto& x : c) {
            const std::string what = x.as<std::string>("");
            if (what == "input") {
              t.guard.input = true;
            } else if (what == "output") {
              t.guard.output = true;
            } else {
              fail("tenant '" + t.name + "': guard: 'check' takes input and output, not '" + what + "'");
            }
          }
        } else {
          t.guard.input = t.guard.output = true;
        }
        if (const auto e = g["every"]) {
          const long v = e.as<long>(-1);
          if (v < 0 || v > 100000)
            fail("tenant '" + t.name + "': guard: 'every' must be a whole number of tokens >= 0");
          t.guard.every = static_cast<uint32_t>(v);
        }
      }
      if (const auto m = n["models"]) {
        if (!m.IsSequence()) fail("tenant '" + t.name + "': 'models' must be a list of model names");
        for (const auto& name : m) t.models.push_back(name.as<std::string>());
      }
    } catch (const YAML::Exception& e) {
      fail("tenant '" + t.name + "': " + e.what());
    }
    t.requests_per_minute = number("requests_per_minute", 0);
    t.tokens_per_minute = number("tokens_per_minute", 0);
    const double concurrent = number("max_concurrent_requests", 0);
    if (concurrent < 0 || concurrent != std::floor(concurrent) || concurrent > 1e9) {
      fail("tenant '" + t.name + "': 'max_concurrent_requests' must be a whole number >= 0");
    }
    t.max_concurrent = static_cast<uint32_t>(concurrent);
    t.weight = number("weight", 1.0);
    t.kv_cache_share = number("kv_cache_share", 1.0);
    if (!(t.kv_cache_share > 0 && t.kv_cache_share <= 1)) {
      fail("tenant '" + t.name + "': 'kv_cache_share' must be in (0, 1]");
    }
    const auto whole = [&](const char* field) -> std::optional<int32_t> {
      if (!n[field]) return std::nullopt;
      const double v = number(field, 0);
      if (v != std::floor(v) || std::abs(v) > 1e6) {
        fail("tenant '" + t.name + "': '" + field + "' must be a whole number in [-1000000, 1000000]");
      }
      return static_cast<int32_t>(v);
    };
    t.priority = whole("priority").value_or(0);
    t.max_priority = whole("max_priority");
    if (t.api_keys.empty()) fail("tenant '" + t.name + "' has no api_keys");
    if (!(t.weight > 0)) fail("tenant '" + t.name + "': 'weight' must be > 0");
    if (t.requests_per_minute < 0) fail("tenant '" + t.name + "': 'requests_per_minute' must be >= 0");
    if (t.tokens_per_minute < 0) fail("tenant '" + t.name + "': 'tokens_per_minute' must be >= 0");
    for (const auto& k : t.api_keys) {
      if (k.empty()) fail("tenant '" + t.name + "' has an empty API key");
    }
    out.push_back(std::move(t));
  }
  try {
    check_unique(out);
  } catch (const std::runtime_error& e) {
    fail(e.what());
  }
  return out;
}

void check_unique(const std::vector<tenant_config>& tenants) {
  std::set<std::string> names, keys;
  for (const auto& t : tenants) {
    if (!names.insert(t.name).second) throw std::runtime_error("tenant '" + t.name + "' appears twice");
    for (const auto& k : t.api_keys) {
      if (!keys.insert(k).second) throw std::runtime_error("an API key of tenant '" + t.name + "' is used twice");
    }
  }
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length whatever the contents; a length mismatch counts as a difference.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

token_bucket::token_bucket(double per_minute, clock::time_point now)
    : capacity_(per_minute), level_(per_minute), last_(now) {}

void token_bucket::refill(clock::time_point now) {
  if (now <= last_) return;
  const double seconds = std::chrono::duration<double>(now - last_).count();
  level_ = std::min(capacity_, level_ + seconds * capacity_ / 60.0);
  last_ = now;
}

double token_bucket::level(clock::time_point now) {
  refill(now);
  return level_;
}

bool token_bucket::try_take(double n, clock::time_point now) {
  if (!limited()) return true;
  refill(now);
  if (level_ < n) return false;
  level_ -= n;
  return true;
}

double token_bucket::seconds_until(double n, clock::time_point now) {
  if (!limited()) return 0;
  refill(now);
  const double missing = std::min(n, capacity_) - level_;
  return missing <= 0 ? 0 : missing * 60.0 / capacity_;
}

void token_bucket::adjust(double n, clock::time_point now) {
  if (!limited()) return;
  refill(now);
  level_ = std::min(capacity_, level_ - n);
}

}  // namespace tandem
