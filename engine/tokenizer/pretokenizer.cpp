#include "engine/tokenizer/pretokenizer.h"

#include <array>
#include <stdexcept>

#include "engine/tokenizer/unicode_data.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

using unicode::char_class;

struct pretokenizer_spec {
  std::string_view name;
  bool digits_first;
  split_rule rule;
  bool ignore_merges;
  bool add_bos_default;
};

// Names as llama.cpp reads them from tokenizer.ggml.pre, grouped by identical behaviour.
constexpr std::array kKnownPretokenizers = {
    pretokenizer_spec{"smollm", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"starcoder", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"refact", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"command-r", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"codeshell", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"exaone", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"minerva-7b", true, split_rule::gpt2, false, false},
    pretokenizer_spec{"gpt2", false, split_rule::gpt2, false, false},
    pretokenizer_spec{"gpt-2", false, split_rule::gpt2, false, false},
    pretokenizer_spec{"phi-2", false, split_rule::gpt2, false, false},
    pretokenizer_spec{"mpt", false, split_rule::gpt2, false, false},
    pretokenizer_spec{"olmo", false, split_rule::gpt2, false, false},
    pretokenizer_spec{"llama3", false, split_rule::llama3, true, true},
    pretokenizer_spec{"llama-v3", false, split_rule::llama3, true, true},
    pretokenizer_spec{"llama-bpe", false, split_rule::llama3, true, true},
    pretokenizer_spec{"falcon3", false, split_rule::llama3, true, true},
    pretokenizer_spec{"pixtral", false, split_rule::llama3, true, true},
    pretokenizer_spec{"dbrx", false, split_rule::llama3, false, false},
    pretokenizer_spec{"smaug-bpe", false, split_rule::llama3, false, false},
    pretokenizer_spec{"qwen2", false, split_rule::qwen2, false, false},
    pretokenizer_spec{"deepseek-r1-qwen", false, split_rule::qwen2, false, false},
    pretokenizer_spec{"megrez", false, split_rule::qwen2, false, false},
    pretokenizer_spec{"stablelm2", false, split_rule::qwen2, false, false},
    pretokenizer_spec{"hunyuan", false, split_rule::qwen2, false, false},
};

// Scans one chunk [begin, end) of code points and appends the code-point index where each
// word ends. Positions at or past `end` read as "no code point" (class 0), which is how the
// look-aheads of the expressions see the end of a chunk.
class chunk_scanner {
 public:
  chunk_scanner(const std::vector<char32_t>& cps, const std::vector<uint16_t>& classes, size_t begin, size_t end,
                std::vector<uint32_t>& ends)
      : cps_(cps), classes_(classes), end_(end), ends_(ends), last_end_(begin) {}

  void scan_gpt2() {
    size_t pos = last_end_;
    while (pos < end_) {
      const char32_t c = cps_[pos];
      if (const size_t n = contraction_length(pos, /*case_insensitive=*/false); n > 0) {
        pos = emit(pos + n);
        continue;
      }
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
      size_t p = pos + (c == ' ' ? 1 : 0);
      const char_class head = at(p);
      if (head.is_letter()) {
        while (at(p).is_letter()) ++p;
        pos = emit(p);
        continue;
      }
      if (head.is_number()) {
        while (at(p).is_number()) ++p;
        pos = emit(p);
        continue;
      }
      if (is_other(head)) {
        while (is_other(at(p))) ++p;
        pos = emit(p);
        continue;
      }
      pos = emit(whitespace_end(pos, /*newline_run=*/false));
    }
  }

  // Llama 3's expression; `max_digits` is 3 for it and 1 for Qwen2's.
  void scan_llama3(size_t max_digits) {
    size_t pos = last_end_;
    while (pos < end_) {
      const char32_t c = cps_[pos];
      const char_class here = at(pos);
      if (const size_t n = contraction_length(pos, /*case_insensitive=*/true); n > 0) {
        pos = emit(pos + n);
        continue;
      }
      // `[^\r\n\p{L}\p{N}]?\p{L}+`
      if (c != '\r' && c != '\n' && !here.is_number() && (here.is_letter() || at(pos + 1).is_letter())) {
        size_t p = pos + 1;
        while (at(p).is_letter()) ++p;
        pos = emit(p);
        continue;
      }
      // `\p{N}{1,3}`: a run of digits, cut every three (every one for Qwen2).
      if (here.is_number()) {
        size_t p = pos;
        while (at(p).is_number()) {
          ++p;
          if (p - pos == max_digits) pos = emit(p);
        }
        pos = emit(p);
        continue;
      }
      // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
      const size_t after_space = pos + (c == ' ' ? 1 : 0);
      const char_class head = at(after_space);
      if (!head.is_whitespace() && !head.is_letter() && !head.is_number()) {
        size_t p = after_space;
        while (is_other(at(p))) ++p;
        while (p < end_ && (cps_[p] == '\r' || cps_[p] == '\n')) ++p;
        pos = emit(p);
        continue;
      }
      pos = emit(whitespace_end(pos, /*newline_run=*/true));
    }
  }

 private:
  char_class at(size_t i) const { return i < end_ ? char_class{classes_[i]} : char_class{}; }

  static bool is_other(char_class k) { return k.exists() && !k.is_whitespace() && !k.is_letter() && !k.is_number(); }

  static char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

  // Length of `'s|'t|'re|'ve|'m|'ll|'d` at `pos`, or 0. (Non-ASCII code points never fold
  // onto these letters, so ASCII folding is the whole case-insensitive rule.)
  size_t contraction_length(size_t pos, bool case_insensitive) const {
    if (cps_[pos] != '\'' || pos + 1 >= end_) return 0;
    const auto fold = [&](char32_t x) { return case_insensitive ? ascii_lower(x) : x; };
    const char32_t a = fold(cps_[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end_) return 0;
    const char32_t b = fold(cps_[pos + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // End of the whitespace word at `pos`: with `newline_run`, `\s*[\r\n]+` first (up to the
  // last CR/LF of the run); then `\s+(?!\S)` (the run but its last code point when a
  // non-space follows inside the chunk); then `\s+`; a lone code point otherwise.
  size_t whitespace_end(size_t pos, bool newline_run) const {
    size_t n = 0;
    size_t after_last_newline = 0;
    while (at(pos + n).is_whitespace()) {
      if (newline_run && (cps_[pos + n] == '\r' || cps_[pos + n] == '\n')) {
        after_last_newline = pos + n + 1;
      }
      ++n;
    }
    if (after_last_newline > 0) return after_last_newline;
    if (n > 1 && pos + n < end_) return pos + n - 1;
    if (n > 0) return pos + n;
    return pos + 1;
  }

  // Records a word ending at `end` (if not empty) and returns `end`.
  size_t emit(size_t end) {
    if (end > last_end_) {
      ends_.push_back(static_cast<uint32_t>(end));
      last_end_ = end;
    }
    return end;
  }

  const std::vector<char32_t>& cps_;
  const std::vector<uint16_t>& classes_;
  size_t end_;
  std::vector<uint32_t>& ends_;
  size_t last_end_;
};

// Class bits of the ASCII range, the common case, without the two-stage look-up.
const std::array<uint16_t, 128>& ascii_classes() {
  static const std::array<uint16_t, 128> table = [] {
    std::array<uint16_t, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = unicode::class_of(c).bits;
    return t;
  }();
  return table;
}

}  // namespace

pretokenizer pretokenizer::by_name(std::string_view name) {
  for (const auto& spec : kKnownPretokenizers) {
    if (spec.name != name) continue;
    pretokenizer p;
    p.name_ = std::string(name);
    p.digits_first_ = spec.digits_first;
    p.rule_ = spec.rule;
    p.ignore_merges_ = spec.ignore_merges;
    p.add_bos_default_ = spec.add_bos_default;
    return p;
  }
  std::string known;
  for (const auto& spec : kKnownPretokenizers) {
    if (!known.empty()) known += ", ";
    known += spec.name;
  }
  throw std::runtime_error("unsupported pre-tokenizer '" + std::string(name) +
                           "' (tokenizer.ggml.pre); supported: " + known);
}

pretokenized pretokenizer::split(std::string_view text) const {
  pretokenized out;
  split(text, out);
  return out;
}

void pretokenizer::split(std::string_view text, pretokenized& out) const {
  out.word_ends.clear();
  thread_local std::vector<char32_t> cps;
  thread_local std::vector<uint16_t> classes;
  thread_local std::vector<uint32_t> cp_ends;
  cps.clear();
  classes.clear();
  cp_ends.clear();

  // Decode; the text is re-encoded only where decoding changed something.
  const auto& ascii = ascii_classes();
  bool reencode = false;
  for (size_t pos = 0; pos < text.size();) {
    const auto d = utf8::decode_lenient(text, pos);
    cps.push_back(d.cp);
    classes.push_back(d.cp < 128 ? ascii[d.cp] : unicode::class_of(d.cp).bits);
    reencode |= utf8::encoded_length(d.cp) != d.length;
    pos += d.length;
  }
  if (reencode) {
    out.text.clear();
    for (char32_t cp : cps) utf8::append(out.text, cp);
  } else {
    out.text.assign(text);
  }

  const auto scan = [&](size_t begin, size_t end) {
    chunk_scanner s(cps, classes, begin, end, cp_ends);
    switch (rule_) {
      case split_rule::gpt2:
        s.scan_gpt2();
        break;
      case split_rule::llama3:
        s.scan_llama3(3);
        break;
      case split_rule::qwen2:
        s.scan_llama3(1);
        break;
    }
  };
  if (digits_first_) {
    // `\p{N}` first: each number code point is a chunk of its own, and so is each run of
    // other code points between them.
    size_t chunk_begin = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      if (!char_class{classes[i]}.is_number()) continue;
      if (i > chunk_begin) scan(chunk_begin, i);
      cp_ends.push_back(static_cast<uint32_t>(i + 1));
      chunk_begin = i + 1;
    }
    if (chunk_begin < cps.size()) scan(chunk_begin, cps.size());
  } else if (!cps.empty()) {
    scan(0, cps.size());
  }

  // Code-point ends to byte ends.
  out.word_ends.reserve(cp_ends.size());
  size_t cp_index = 0;
  uint32_t byte_pos = 0;
  for (uint32_t end : cp_ends) {
    for (; cp_index < end; ++cp_index) {
      byte_pos += static_cast<uint32_t>(utf8::encoded_length(cps[cp_index]));
    }
    out.word_ends.push_back(byte_pos);
  }
}

}  // namespace tandem
