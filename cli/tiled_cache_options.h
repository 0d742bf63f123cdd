// The tiled-weight cache options `generate` and `serve` share: --tiled-cache-dir (default
// $TANDEM_HOME/tiled) and --no-tiled-cache. The cache keeps the CPU kernels' re-laid copy
// of a model's matrices between starts (engine/model/tiled_cache.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "engine/model/model_path.h"

namespace tandem::cli {

inline void add_tiled_cache_options(CLI::App* cmd, std::string& dir) {
  dir = (tandem_home() / "tiled").string();
  cmd->add_option("--tiled-cache-dir", dir,
                  "Keep the CPU kernels' re-laid weights here between starts (one file per model, about the size "
                  "of its matrices); later starts map it instead of re-laying")
      ->capture_default_str();
  // Defined after --tiled-cache-dir, so its callback runs after that value is stored: it wins.
  cmd->add_flag_callback("--no-tiled-cache", [&dir] { dir.clear(); },
                         "Re-lay the weights in memory at every start, writing no cache file");
}

}  // namespace tandem::cli
