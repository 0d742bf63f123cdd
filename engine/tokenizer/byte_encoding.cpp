#include "engine/tokenizer/byte_encoding.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace tandem::byte_encoding {
namespace {

bool is_self_printed(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct tables {
  std::array<char32_t, 256> cp_of_byte{};
  std::array<int16_t, 512> byte_of_cp{};  // every code point of the alphabet is below 512

  tables() {
    byte_of_cp.fill(-1);
    char32_t next_unprintable = 256;
    for (unsigned b = 0; b < 256; ++b) {
      cp_of_byte[b] = is_self_printed(b) ? b : next_unprintable++;
      byte_of_cp[cp_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};

const tables& table() {
  static const tables t;
  return t;
}

}  // namespace

char32_t codepoint_of(uint8_t b) { return table().cp_of_byte[b]; }

std::optional<uint8_t> byte_of(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int16_t b = table().byte_of_cp[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char b : raw) utf8::append(out, codepoint_of(b));
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto check = utf8::check_sequence(text, pos);
    if (check.state != utf8::sequence_state::complete) return std::nullopt;
    const auto d = utf8::decode_lenient(text, pos);
    const auto b = byte_of(d.cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    pos += d.length;
  }
  return out;
}

}  // namespace tandem::byte_encoding
