#include "engine/tokenizer/spm_model.h"

#include <algorithm>
#include <cstdio>

#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // ▁, SentencePiece's space

struct symbol {
  uint32_t offset;  // into the text
  uint32_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct candidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // of the merged text; a changed length marks the candidate stale
};

// Heap order: highest score on top; among equal scores the leftmost pair.
struct later_candidate {
  bool operator()(const candidate& a, const candidate& b) const {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  }
};

}  // namespace

spm_model::spm_model(const std::vector<float>& scores, const string_map<token_id>& id_of_text, token_id unknown)
    : scores_(&scores) {
  for (const auto& [text, id] : id_of_text) vocab_.insert(text, id, /*overwrite=*/true);
  for (unsigned b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    token_id id = find(hex);
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = find(std::string_view(&c, 1));
    }
    byte_token_[b] = id >= 0 ? id : unknown;
  }
  words_are_independent_ = true;
  for (const auto& [text, id] : id_of_text) {
    size_t pos = 0;
    while (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) pos += kSpaceMark.size();
    if (text.find(kSpaceMark, pos) != std::string::npos) {
      words_are_independent_ = false;
      break;
    }
  }
}

token_id spm_model::find(std::string_view text) const { return vocab_.find(text); }

void spm_model::encode(std::string_view text, std::vector<token_id>& out) const {
  thread_local std::vector<symbol> symbols;
  thread_local std::vector<candidate> heap;
  symbols.clear();
  heap.clear();
  // Characters by their lead byte alone (no validation), cut short at the end of the text.
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min(utf8::length_from_lead(static_cast<unsigned char>(text[pos])), text.size() - pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        {static_cast<uint32_t>(pos), static_cast<uint32_t>(len), index - 1, pos + len < text.size() ? index + 1 : -1});
    pos += len;
  }
  // Cut the chain before each ▁ that follows a non-▁ character (see words_are_independent_).
  const auto is_space_mark = [&](const symbol& sym) { return text.substr(sym.offset, sym.length) == kSpaceMark; };
  if (words_are_independent_) {
    for (size_t i = 1; i < symbols.size(); ++i) {
      if (is_space_mark(symbols[i]) && !is_space_mark(symbols[i - 1])) {
        symbols[i - 1].next = -1;
        symbols[i].prev = -1;
      }
    }
  }

  const later_candidate order;
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const symbol& l = symbols[left];
    const symbol& r = symbols[right];
    const token_id id = find(text.substr(l.offset, l.length + r.length));
    if (id < 0) return;
    heap.push_back({(*scores_)[static_cast<size_t>(id)], left, right, l.length + r.length});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  const auto emit = [&](const symbol& sym) {
    const std::string_view piece = text.substr(sym.offset, sym.length);
    if (const token_id id = find(piece); id >= 0) {
      out.push_back(id);
      return;
    }
    for (unsigned char b : piece) {
      if (byte_token_[b] >= 0) out.push_back(byte_token_[b]);
    }
  };

  // Merge each chain (the whole text, or one word) on its own.
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t begin = 0; begin < n;) {
    int32_t end = begin + 1;
    while (end < n && symbols[end].prev >= 0) ++end;
    heap.clear();
    for (int32_t i = begin + 1; i < end; ++i) consider(i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), order);
      const candidate c = heap.back();
      heap.pop_back();
      symbol& left = symbols[c.left];
      symbol& right = symbols[c.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      consider(left.prev, c.left);
      consider(c.left, left.next);
    }
    for (int32_t i = begin; i >= 0; i = symbols[i].next) emit(symbols[i]);
    begin = end;
  }
}

}  // namespace tandem
