// UTF-8 helpers: encoding, the lenient decoding the tokenizers use (matches llama.cpp's), and
// strict validation for streaming output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

// Appends the UTF-8 form of `cp` (at most U+10FFFF; surrogates are encoded like any other
// value, as llama.cpp does). Returns the number of bytes appended.
size_t append(std::string& out, char32_t cp);
std::string encode(char32_t cp);
// Bytes `cp` takes in UTF-8 (1..4).
inline size_t encoded_length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Length of the sequence that `lead` starts, judged by its high bits alone: 1 for ASCII and
// for stray continuation bytes, 2/3/4 for lead bytes (0xF8..0xFF count as 4). The
// SentencePiece tokenizer splits its input into symbols this way, without validation.
inline size_t length_from_lead(unsigned char lead) {
  static constexpr unsigned char kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

struct decoded {
  char32_t cp;
  size_t length;  // bytes consumed, >= 1
};

// Lenient decoding at `pos` (< text.size()), the rule of llama.cpp's tokenizers: a lead byte
// followed by the right number of continuation bytes decodes to its value (overlong forms
// and surrogates included); anything else consumes one byte and yields U+FFFD. Values above
// U+10FFFF (which llama.cpp cannot re-encode and aborts on) also yield U+FFFD for one byte.
decoded decode_lenient(std::string_view text, size_t pos);

// Strict UTF-8 (RFC 3629): how a byte sequence starting at `pos` stands.
enum class sequence_state {
  complete,    // a valid sequence of `length` bytes
  incomplete,  // the bytes up to the end of `text` are a valid prefix; more may complete it
  invalid,     // the byte at `pos` can never start a valid sequence here: emit it alone
};
struct sequence_check {
  sequence_state state;
  size_t length;  // for complete: its length; otherwise the bytes examined
};
sequence_check check_sequence(std::string_view text, size_t pos);

// True when `text` is entirely valid UTF-8.
bool is_valid(std::string_view text);

// `text` with every byte that is not part of a complete valid sequence replaced by U+FFFD
// (JSON strings must be valid UTF-8; a single token may hold part of a character).
std::string replace_invalid(std::string_view text);

}  // namespace tandem::utf8
