// What Tandem's own parts (the HTTP front, the CLI, tests, benchmarks) read of a running
// runtime beyond the embedding API. Not installed, like every type it returns: a host built
// against an installed Tandem sees include/tandem/runtime.h only.
#pragma once

#include <string>
#include <vector>

#include "actors/runtime_actors.h"
#include "engine/chat/chat_template.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "tandem/runtime.h"

namespace tandem {

class runtime_access {
 public:
  static const tokenizer& tok(const runtime& rt);
  // The model's chat template, or nullptr (then chat_error says why).
  static const chat_template* chat(const runtime& rt);
  static const std::string& chat_error(const runtime& rt);
  // The file's tool_use template, which requests with tools render with, or nullptr.
  static const chat_template* tool_chat(const runtime& rt);
  static const model_config& model_cfg(const runtime& rt);
  // Memory the model's weights hold beyond the file's size: tiled copies of matrices whose
  // rows stay in use too (model::tiled_bytes_kept_twice). The supervisor counts it.
  static uint64_t weight_bytes_beyond_file(const runtime& rt) { return rt.weight_bytes_beyond_file_; }
  // The LoRA adapters' names (runtime_config::lora_adapters, in order: llama-server's ids).
  static std::vector<std::string> adapter_names(const runtime& rt);
  // The scheduler, cache manager, device worker and drafter, for the server's metrics,
  // tests and benchmarks.
  static const runtime_actors& actors(const runtime& rt) { return *rt.actors_; }
};

}  // namespace tandem
