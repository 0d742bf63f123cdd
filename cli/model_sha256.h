// --model-sha256 of `serve` and `generate`: the model file must have this SHA-256 before it is
// used (engine/integrity/file_sha256.h computes it in one pass and caches it under
// $TANDEM_HOME). A mismatch is an error naming both digests, and the command exits non-zero.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace tandem::cli {

// Where digests are remembered between starts: $TANDEM_HOME/sha256-cache.
std::filesystem::path sha256_cache_path();

// Adds --model-sha256 (64 hex digits, checked when parsed) bound to `sha256`.
void add_model_sha256_option(CLI::App* cmd, std::string& sha256);

// With `expected` set: resolves the model (resolve_model_path) and checks its digest, printing
// one line to `log` (verified, and whether the cache answered); throws a std::runtime_error
// naming `what` (where the digest was given) and both digests when it differs. Does nothing
// when `expected` is empty.
void verify_model_sha256(std::string_view model, const std::string& expected, std::FILE* log,
                         const std::string& what = "--model-sha256");

}  // namespace tandem::cli
