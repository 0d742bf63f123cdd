#include "engine/tokenizer/utf8.h"

namespace tandem::utf8 {

size_t append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
    return 1;
  }
  if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    return 2;
  }
  if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    return 3;
  }
  out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
  out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
  out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
  out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  return 4;
}

std::string encode(char32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

namespace {
inline bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }
}  // namespace

decoded decode_lenient(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  size_t length = 0;
  char32_t cp = 0;
  if (lead < 0xC0) {
    return {kReplacement, 1};  // a continuation byte cannot start a sequence
  } else if (lead < 0xE0) {
    length = 2;
    cp = lead & 0x1F;
  } else if (lead < 0xF0) {
    length = 3;
    cp = lead & 0x0F;
  } else if (lead < 0xF8) {
    length = 4;
    cp = lead & 0x07;
  } else {
    return {kReplacement, 1};
  }
  if (pos + length > text.size()) return {kReplacement, 1};
  for (size_t i = 1; i < length; ++i) {
    if (!is_continuation(byte(i))) return {kReplacement, 1};
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  if (cp > kMaxCodepoint) return {kReplacement, 1};
  return {cp, length};
}

sequence_check check_sequence(std::string_view text, size_t pos) {
  const size_t available = text.size() - pos;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {sequence_state::complete, 1};
  size_t length = 0;
  // Allowed range of the second byte (it excludes overlong forms, surrogates, > U+10FFFF).
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {sequence_state::invalid, 1};
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= available) return {sequence_state::incomplete, available};
    const unsigned char b = byte(i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) return {sequence_state::invalid, 1};
  }
  return {sequence_state::complete, length};
}

bool is_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const auto c = check_sequence(text, pos);
    if (c.state != sequence_state::complete) return false;
    pos += c.length;
  }
  return true;
}

std::string replace_invalid(std::string_view text) {
  if (is_valid(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto c = check_sequence(text, i);
    if (c.state == sequence_state::complete) {
      out.append(text, i, c.length);
      i += c.length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace tandem::utf8
