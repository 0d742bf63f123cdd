// Where models live: $TANDEM_HOME/models, or ~/.cache/tandem/models when TANDEM_HOME is unset.
#pragma once

#include <filesystem>
#include <string_view>

namespace tandem {

inline constexpr std::string_view kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::filesystem::path tandem_home();
std::filesystem::path default_model_path();

// "" and "default" name the default model; anything else is a path. Throws
// std::runtime_error when the file does not exist (for the default model the message says
// to run `make model`).
std::filesystem::path resolve_model_path(std::string_view spec);

}  // namespace tandem
