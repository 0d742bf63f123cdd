// The byte-level alphabet of GPT-2 style vocabularies: each of the 256 byte values is shown
// as one printable code point (printable Latin-1 bytes as themselves, the others as
// U+0100 + n in byte order), so that every token text is printable UTF-8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::byte_encoding {

// The code point that stands for byte `b`.
char32_t codepoint_of(uint8_t b);
// The byte that code point `cp` stands for, if any.
std::optional<uint8_t> byte_of(char32_t cp);

// Raw bytes -> printable text (each byte becomes one code point).
std::string encode(std::string_view raw);
// Printable text -> raw bytes; nullopt when `text` holds a code point outside the alphabet
// (or is not valid UTF-8).
std::optional<std::string> decode(std::string_view text);

}  // namespace tandem::byte_encoding
