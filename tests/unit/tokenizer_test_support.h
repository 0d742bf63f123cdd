// Shared by the tokenizer tests: loading the default model and the test vocabularies (a
// missing file is a failure that names the make target fetching it), and reading the
// reference vectors of tests/data/tokenizer/ (made by tests/tools/make_tokenizer_vectors.py).
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::test {

// The real Gemma 3 270M file (scripts/fetch-gemma3.sh, part of `make test-data`): its
// vocabulary, and the gemma3 architecture's tests.
inline std::filesystem::path gemma3_model_path() { return tandem_home() / "models" / "gemma-3-270m-q4_k_m.gguf"; }

inline std::filesystem::path test_vocab_path(const std::string& vocab) {
  if (vocab == "default") return default_model_path();
  if (vocab == "gemma3") return gemma3_model_path();
  return tandem_home() / "test-vocab" / ("ggml-vocab-" + vocab + ".gguf");
}

// Vocabularies whose tests skip (with a message) rather than fail when the file is absent:
// the gemma3 file is 250 MB, fetched by `make test-data` but not needed by the rest of CI.
inline bool vocab_is_optional(const std::string& vocab) { return vocab == "gemma3"; }

// Loads the tokenizer of `vocab` ("default", "llama-bpe", "llama-spm", "qwen2", "gemma3"); on
// a missing file records a failure naming the make target (an optional one: prints why it
// is skipped) and returns false.
inline bool load_vocab(const std::string& vocab, std::optional<tokenizer>& out) {
  const auto path = test_vocab_path(vocab);
  if (!std::filesystem::exists(path) && vocab_is_optional(vocab)) {
    std::printf("[ skipped  ] %s is missing: run `make test-data` to test the %s vocabulary\n", path.c_str(),
                vocab.c_str());
    return false;
  }
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run `" << (vocab == "default" ? "make model" : "make test-data")
                  << "` first";
    return false;
  }
  out.emplace(tokenizer::from_gguf(gguf::file::open(path)));
  return true;
}

inline std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline boost::json::value read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return boost::json::parse(ss.str());
}

inline std::filesystem::path data_dir() { return std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data"; }

inline std::vector<token_id> ids_of(const boost::json::value& v) {
  std::vector<token_id> ids;
  for (const auto& x : v.as_array()) ids.push_back(static_cast<token_id>(x.to_number<int64_t>()));
  return ids;
}

}  // namespace tandem::test
