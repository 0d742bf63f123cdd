// `tandem serve --lora NAME=PATH[:SCALE]` (repeatable; the config file's `lora` key takes a
// list of the same strings): LoRA adapters over the model (runtime_config::lora_adapters).
// SCALE defaults to 1 (llama-server's --lora-scaled takes FNAME:SCALE the same way).
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/runtime.h"

namespace tandem::cli {

// One NAME=PATH[:SCALE]; throws CLI::ValidationError saying what is wrong.
inline runtime_config::lora_adapter parse_lora_spec(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw CLI::ValidationError("--lora", "'" + text + "' is not NAME=PATH[:SCALE]");
  }
  runtime_config::lora_adapter a;
  a.name = text.substr(0, eq);
  a.path = text.substr(eq + 1);
  // A trailing ":number" is the scale (a path may hold ':' elsewhere).
  if (const size_t colon = a.path.rfind(':'); colon != std::string::npos && colon + 1 < a.path.size()) {
    const std::string tail = a.path.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    const double s = std::strtod(tail.c_str(), &end);
    if (end != nullptr && *end == '\0' && errno == 0) {
      if (!std::isfinite(s) || std::fabs(s) > 100) {
        throw CLI::ValidationError("--lora", "'" + text + "': the scale must be a number in [-100, 100]");
      }
      a.scale = static_cast<float>(s);
      a.path.resize(colon);
    }
  }
  if (a.path.empty()) throw CLI::ValidationError("--lora", "'" + text + "' has no path");
  return a;
}

inline void add_lora_options(CLI::App* cmd, runtime_config& rt) {
  cmd->add_option_function<std::vector<std::string>>(
         "--lora",
         [&rt](const std::vector<std::string>& specs) {
           rt.lora_adapters.clear();
           for (const auto& s : specs) rt.lora_adapters.push_back(parse_lora_spec(s));
         },
         "A LoRA adapter (GGUF, as llama.cpp's convert_lora_to_gguf writes it) as NAME=PATH[:SCALE]; repeatable. "
         "Requests pick it with \"model\": \"<model>:NAME\" or llama-server's \"lora\" field (ids in this order)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace tandem::cli
