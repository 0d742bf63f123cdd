// The speculative-decoding options `generate` and `serve` share (vLLM's names where they
// exist): --speculative, --draft-model, --num-speculative-tokens and the K bounds.
#pragma once

#include <CLI/CLI.hpp>

#include "tandem/runtime.h"

namespace tandem::cli {

inline void add_speculative_options(CLI::App* cmd, runtime_config& rt) {
  cmd->add_option("--speculative", rt.speculative, "Drafting method: none, ngram, layer-skip or draft")
      ->check(CLI::IsMember({"none", "ngram", "layer-skip", "draft"}))
      ->capture_default_str();
  cmd->add_option("--draft-model", rt.draft_model, "Draft model GGUF for --speculative draft (same vocabulary)");
  cmd->add_option("--num-speculative-tokens", rt.num_speculative_tokens,
                  "Draft tokens per step to start with (K); adaptive n-gram starts at --speculative-k-max")
      ->capture_default_str();
  cmd->add_option("--speculative-k-min", rt.speculative_k_min, "Lower bound of the adaptive K")->capture_default_str();
  cmd->add_option("--speculative-k-max", rt.speculative_k_max, "Upper bound of the adaptive K")->capture_default_str();
  cmd->add_option("--speculative-layers", rt.speculative_layers,
                  "Blocks the layer-skip drafter runs (0 = a quarter of the model's)")
      ->capture_default_str();
  cmd->add_flag("!--no-speculative-adaptive", rt.speculative_adaptive,
                "Draft at every step instead of letting the cost model switch drafting off");
}

}  // namespace tandem::cli
