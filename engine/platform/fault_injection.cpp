#include "engine/platform/fault_injection.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tandem {
namespace {

struct fault {
  std::string point;
  long at = 0;  // the hit that fires
  std::atomic<long> hits{0};
};

// Parsed once; read-only afterwards but for the counters.
const std::vector<std::unique_ptr<fault>>& faults() {
  static const auto parsed = [] {
    std::vector<std::unique_ptr<fault>> out;
    const char* env = std::getenv("TANDEM_FAULTS");
    std::string_view rest = env ? env : "";
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (const auto colon = item.rfind(':'); colon != std::string_view::npos) {
        auto f = std::make_unique<fault>();
        f->point = std::string(item.substr(0, colon));
        f->at = std::atol(std::string(item.substr(colon + 1)).c_str());
        if (f->at > 0) out.push_back(std::move(f));
      }
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    return out;
  }();
  return parsed;
}

}  // namespace

bool fault_point(std::string_view point) {
  const auto& all = faults();
  if (all.empty()) return false;
  for (const auto& f : all) {
    if (f->point == point) return f->hits.fetch_add(1) + 1 == f->at;
  }
  return false;
}

}  // namespace tandem
