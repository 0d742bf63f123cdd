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

inline std::filesystem::path test_vocab_path(const std::string& vocab) {
  if (vocab == "default") return default_model_path();
  return tandem_home() / "test-vocab" / ("ggml-vocab-" + vocab + ".gguf");
}

// Loads the tokenizer of `vocab` ("default", "llama-bpe", "llama-spm"); on a missing file
// records a failure naming the make target and returns false.
inline bool load_vocab(const std::string& vocab, std::optional<tokenizer>& out) {
  const auto path = test_vocab_path(vocab);
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
