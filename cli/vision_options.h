// `--mmproj PATH` and the bounds on images (serve; generate takes --mmproj and --image):
// runtime_config's vision fields, named as llama-server (--mmproj) and vLLM
// (--limit-mm-per-prompt) name them.
#pragma once

#include <CLI/CLI.hpp>
#include <cctype>
#include <string>

#include "tandem/runtime.h"

namespace tandem::cli {

// vLLM's --limit-mm-per-prompt takes JSON ({"image": 4}); a bare count and image=4 work too.
inline uint32_t parse_image_limit(const std::string& text) {
  std::string digits;
  bool image = text.find("image") != std::string::npos;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  }
  const bool bare = !digits.empty() && digits.size() == text.size();
  if ((!bare && !image) || digits.empty() || digits.size() > 4) {
    throw CLI::ValidationError("--limit-mm-per-prompt", "'" + text + "' is not a count or {\"image\": N}");
  }
  return static_cast<uint32_t>(std::stoul(digits));
}

inline void add_vision_options(CLI::App* cmd, runtime_config& rt) {
  cmd->add_option("--mmproj", rt.mmproj,
                  "A vision projector GGUF for the model (llama.cpp's mmproj file): chat requests may carry images "
                  "(CPU device only)");
  cmd->add_option("--mmproj-threads", rt.mmproj_threads,
                  "The image encoder's threads, at idle priority beside the model's (0 = half of --threads)")
      ->check(CLI::Range(0u, 1024u))
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--limit-mm-per-prompt", [&rt](const std::string& v) { rt.limit_mm_per_prompt = parse_image_limit(v); },
         "Images per request at most, as a count or vLLM's {\"image\": N}")
      ->default_str(std::to_string(rt.limit_mm_per_prompt));
  cmd->add_option("--image-max-bytes", rt.image_max_bytes, "An image's encoded size at most")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--image-max-side", rt.image_max_side, "An image's declared width or height at most, pixels")
      ->check(CLI::Range(1u, 65535u))
      ->capture_default_str();
  cmd->add_option("--image-max-pixels", rt.image_max_pixels, "An image's declared width x height at most")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
}

}  // namespace tandem::cli
