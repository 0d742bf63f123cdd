// The streaming decoder: for every reference vector, feeding the ids one at a time must give
// back decode(ids) exactly, never cut a valid UTF-8 character between two outputs, and hold
// back at most an incomplete trailing sequence.
#include <boost/json/src.hpp>  // Boost.JSON compiled into this test (header-only mode)

#include "tokenizer_test_support.h"

#include "engine/tokenizer/utf8.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// Byte positions of `text` that lie strictly inside a valid multi-byte sequence.
std::vector<bool> inside_character(const std::string& text) {
  std::vector<bool> inside(text.size() + 1, false);
  for (size_t pos = 0; pos < text.size();) {
    const auto c = utf8::check_sequence(text, pos);
    if (c.state == utf8::sequence_state::complete) {
      for (size_t k = 1; k < c.length; ++k) inside[pos + k] = true;
      pos += c.length;
    } else {
      pos += 1;
    }
  }
  return inside;
}

void check_stream(const tokenizer& tok, const std::vector<token_id>& ids, bool render_special,
                  const std::string& name) {
  const std::string whole = tok.decode(ids, render_special);
  const auto inside = inside_character(whole);
  incremental_decoder dec(tok, render_special);
  std::string joined;
  for (token_id id : ids) {
    joined += dec.push(id);
    EXPECT_FALSE(inside[joined.size()]) << name << ": output cut a character at byte " << joined.size();
    EXPECT_LE(dec.pending(), 3u) << name;
    // What is held back is a prefix of a character that could still complete.
    EXPECT_EQ(whole.compare(0, joined.size(), joined), 0) << name;
  }
  joined += dec.flush();
  EXPECT_EQ(joined, whole) << name;
  EXPECT_EQ(dec.pending(), 0u);
}

class stream_vectors : public ::testing::TestWithParam<std::string> {};

TEST_P(stream_vectors, every_byte_once_and_no_cut_characters) {
  std::optional<tokenizer> tok;
  if (!load_vocab(GetParam(), tok)) return;
  const auto doc = read_json(data_dir() / "tokenizer" / (GetParam() + ".json")).as_object();
  for (const auto& c : doc.at("cases").as_array()) {
    const std::string name = std::string(c.at("name").as_string());
    for (const auto& run : c.at("runs").as_array()) {
      const auto ids = ids_of(run.at("ids"));
      check_stream(*tok, ids, true, name);
      check_stream(*tok, ids, false, name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(vocabularies, stream_vectors, ::testing::Values("default", "llama-bpe", "llama-spm"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

TEST(incremental_decoder, holds_a_character_split_across_tokens) {
  std::optional<tokenizer> tok;
  if (!load_vocab("default", tok)) return;
  // SmolLM2 spells the llama emoji F0 9F A6 99 with three byte tokens.
  const auto ids = tok->encode("🦙", false, false);
  ASSERT_EQ(ids.size(), 3u);
  incremental_decoder dec(*tok);
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.pending(), 2u);
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "🦙");
  EXPECT_EQ(dec.flush(), "");
}

TEST(incremental_decoder, releases_bytes_that_can_never_be_valid_at_once) {
  std::optional<tokenizer> tok;
  if (!load_vocab("default", tok)) return;
  const auto lone_continuation = *tok->find_token("¦");  // the byte A6
  incremental_decoder dec(*tok);
  EXPECT_EQ(dec.push(lone_continuation), "\xA6");
  EXPECT_EQ(dec.pending(), 0u);
  // A lead byte followed by a non-continuation: both go out as soon as that is seen.
  const auto lead = tok->encode("🦙", false, false)[0];  // F0 9F
  EXPECT_EQ(dec.push(lead), "");
  EXPECT_EQ(dec.push(*tok->find_token("a")),
            "\xF0\x9F"
            "a");
  // An unfinished character at the end comes out on flush.
  EXPECT_EQ(dec.push(lead), "");
  EXPECT_EQ(dec.flush(), "\xF0\x9F");
}

TEST(incremental_decoder, control_tokens_follow_render_special) {
  std::optional<tokenizer> tok;
  if (!load_vocab("default", tok)) return;
  incremental_decoder shown(*tok, true), hidden(*tok, false);
  EXPECT_EQ(shown.push(2), "<|im_end|>");
  EXPECT_EQ(hidden.push(2), "");
}

}  // namespace
