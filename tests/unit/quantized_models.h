// The default model requantized with `tandem quantize --allow-requantize` (the real binary),
// cached next to the binary (build/quantized/) so the byte-exactness and fidelity tests share
// one file per type. A file older than the binary is made again.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/model/model_path.h"

namespace tandem::testing {

inline std::filesystem::path quantized_default_model(const std::string& file_type) {
  namespace fs = std::filesystem;
  const fs::path binary = TANDEM_BINARY;
  const fs::path dir = binary.parent_path().parent_path() / "quantized";
  const fs::path out = dir / ("smollm2-135m-" + file_type + ".gguf");
  if (fs::exists(out) && fs::last_write_time(out) >= fs::last_write_time(binary)) return out;
  fs::create_directories(dir);
  // Tests run in parallel: each writes its own partial file; the rename is atomic.
  const fs::path partial = out.string() + "." + std::to_string(::getpid()) + ".partial";
  // Appended piece by piece: `"'" + std::string` inserts at the front, where GCC 12 warns of an
  // overlapping memcpy that cannot happen (-Wrestrict, its bug 105651).
  std::string cmd = "'";
  cmd += binary.string() + "' quantize --allow-requantize -q '" + default_model_path().string() + "' '" +
         partial.string() + "' " + file_type;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  fs::rename(partial, out);
  return out;
}

}  // namespace tandem::testing
