// The tiled-weight cache options `generate` and `serve` share: --tiled-cache-dir (default
// $TANDEM_HOME/tiled) and --no-tiled-cache. The cache keeps the CPU kernels' re-laid copy
// of a model's matrices between starts (engine/model/tiled_cache.h).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/model/model_path.h"
#include "tandem/runtime.h"

namespace tandem::cli {

inline void add_tiled_cache_options(CLI::App* cmd, runtime_config& rt) {
  rt.tiled_cache_dir = (tandem_home() / "tiled").string();
  cmd->add_option("--tiled-cache-dir", rt.tiled_cache_dir,
                  "Keep the CPU kernels' re-laid weights here between starts (one file per model, about the size "
                  "of its matrices); later starts map it instead of re-laying")
      ->capture_default_str();
  cmd->add_flag("!--no-tiled-cache", rt.tiled_cache,
                "Re-lay the weights in memory at every start, writing no cache file");
}

}  // namespace tandem::cli
