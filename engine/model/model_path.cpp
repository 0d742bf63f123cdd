#include "engine/model/model_path.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tandem {

std::filesystem::path tandem_home() {
  if (const char* h = std::getenv("TANDEM_HOME"); h != nullptr && *h != '\0') return h;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "tandem";
}

std::filesystem::path default_model_path() { return tandem_home() / "models" / kDefaultModelFile; }

std::filesystem::path resolve_model_path(std::string_view spec) {
  if (spec.empty() || spec == "default") {
    auto p = default_model_path();
    if (!std::filesystem::exists(p)) {
      throw std::runtime_error("the default model is missing (" + p.string() +
                               "): run `make model` to fetch it, or pass --model PATH");
    }
    return p;
  }
  std::filesystem::path p(spec);
  if (!std::filesystem::exists(p)) throw std::runtime_error("model file not found: " + p.string());
  return p;
}

}  // namespace tandem
