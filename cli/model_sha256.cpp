#include "cli/model_sha256.h"

#include <chrono>
#include <stdexcept>

#include "engine/integrity/file_sha256.h"
#include "engine/model/model_path.h"

namespace tandem::cli {

std::filesystem::path sha256_cache_path() { return tandem_home() / "sha256-cache"; }

void add_model_sha256_option(CLI::App* cmd, std::string& sha256) {
  cmd->add_option("--model-sha256", sha256,
                  "Refuse to start unless the model file's SHA-256 is this (64 hex digits; computed once, then "
                  "remembered in $TANDEM_HOME/sha256-cache while the file's size and times are unchanged)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v.empty()) return {};  // not checked (what --print-config writes when unset)
            try {
              v = parse_sha256_hex(v);
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
            return {};
          },
          "SHA256", "sha256"));
}

void verify_model_sha256(std::string_view model, const std::string& expected, std::FILE* log,
                         const std::string& what) {
  if (expected.empty()) return;
  const auto path = resolve_model_path(model);
  sha256_cache cache(sha256_cache_path());
  const auto t0 = std::chrono::steady_clock::now();
  file_sha256 got;
  try {
    got = verify_sha256(path, expected, cache);
  } catch (const sha256_mismatch& e) {
    throw std::runtime_error(what + ": the model file " + path.string() + " does not match: expected " +
                             e.expected + ", actual " + e.actual + "; refusing to use it");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (got.from_cache) {
    std::fprintf(log, "tandem: model SHA-256 verified: %s (remembered in %s; the file is unchanged)\n", got.hex.c_str(),
                 cache.path().c_str());
  } else {
    std::fprintf(log, "tandem: model SHA-256 verified: %s (read in %.1f s)\n", got.hex.c_str(), s);
  }
  std::fflush(log);
}

}  // namespace tandem::cli
