// Feeding a reply parser (chat_output_parser) the same model output in different pieces:
// every way of feeding must give the same content, reasoning and calls, and the call deltas
// must have OpenAI's stream form (a call's first delta carries its id and name, later ones
// only argument text, indices in order).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/output_parser.h"

namespace tandem::test {

struct call {
  std::string id, name, arguments;
  bool operator==(const call&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const call& c) {
  return os << "{" << c.id << ", " << c.name << ", " << c.arguments << "}";
}

struct result {
  std::string reasoning, content;
  std::vector<call> calls;
};

// Ids in call order, so every way of feeding names the calls alike.
inline std::function<std::string()> counter_ids() {
  auto n = std::make_shared<int>(0);
  return [n] { return "call_" + std::to_string((*n)++); };
}

inline void absorb(result& r, const chat_output_delta& d) {
  r.reasoning += d.reasoning_content;
  r.content += d.content;
  for (const auto& t : d.tool_calls) {
    if (t.index == r.calls.size()) {
      ASSERT_FALSE(t.id.empty()) << "a call's first delta has its id";
      ASSERT_FALSE(t.name.empty()) << "a call's first delta has its name";
      r.calls.push_back({t.id, t.name, t.arguments});
    } else {
      ASSERT_LT(t.index, r.calls.size()) << "call indices come in order";
      EXPECT_TRUE(t.id.empty() && t.name.empty()) << "only a call's first delta names it";
      r.calls[t.index].arguments += t.arguments;
    }
  }
}

inline result run(const chat_template& t, std::string_view prompt, chat_output_options o,
                  const std::vector<std::string_view>& pieces) {
  o.make_id = counter_ids();
  chat_output_parser p(t, prompt, o);
  result r;
  for (auto piece : pieces) absorb(r, p.feed(piece));
  absorb(r, p.finish());
  // The totals agree with the deltas.
  EXPECT_EQ(p.content(), r.content);
  EXPECT_EQ(p.reasoning_content(), r.reasoning);
  const auto calls = p.tool_calls();
  EXPECT_EQ(calls.size(), r.calls.size());
  for (size_t i = 0; i < calls.size() && i < r.calls.size(); ++i) {
    EXPECT_EQ((call{calls[i].id, calls[i].name, calls[i].arguments}), r.calls[i]);
  }
  EXPECT_EQ(p.has_tool_calls(), !r.calls.empty());
  return r;
}

// Feeds `text` whole, byte by byte, in two pieces split at every byte and in pieces of random
// sizes (1 to 8 bytes, a few seeds); all must give `want`.
inline void expect_parse(const chat_template& t, std::string_view prompt, const chat_output_options& o,
                         std::string_view text, const result& want) {
  const auto check = [&](const result& got, const std::string& how) {
    EXPECT_EQ(got.reasoning, want.reasoning) << how;
    EXPECT_EQ(got.content, want.content) << how;
    EXPECT_EQ(got.calls, want.calls) << how;
  };
  check(run(t, prompt, o, {text}), "whole");
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  check(run(t, prompt, o, bytes), "byte by byte");
  for (unsigned seed = 1; seed <= 4; ++seed) {
    std::mt19937 rng(seed);
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min<size_t>(text.size() - i, 1 + rng() % 8);
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    check(run(t, prompt, o, pieces), "random pieces, seed " + std::to_string(seed));
  }
  for (size_t cut = 1; cut < text.size(); ++cut) {
    const result got = run(t, prompt, o, {text.substr(0, cut), text.substr(cut)});
    if (got.content != want.content || got.reasoning != want.reasoning || !(got.calls == want.calls)) {
      check(got, "split at " + std::to_string(cut));
      return;
    }
  }
}

}  // namespace tandem::test
