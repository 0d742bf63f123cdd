#include <gtest/gtest.h>

#include "engine/speculation/ngram_index.h"

using tandem::ngram_index;
using v = std::vector<int32_t>;

TEST(NgramIndex, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  ngram_index ix(1, 3);
  ix.append(v{1, 2, 3, 4, 5, 9, 9, 1, 2, 3});
  EXPECT_EQ(ix.propose(2).tokens, (v{4, 5}));
  EXPECT_EQ(ix.propose(10).tokens, (v{4, 5, 9, 9, 1, 2, 3}));  // bounded by the history
  ix.append(v{7});
  EXPECT_TRUE(ix.propose(3).tokens.empty());  // "7" never occurred before
  ix.append(v{1, 2});
  EXPECT_EQ(ix.propose(1).tokens, (v{3}));  // the latest "1 2" was followed by 3 ... and "7 1 2" is new
}

TEST(NgramIndex, FallsBackToShorterNgrams) {
  ngram_index ix(1, 3);
  ix.append(v{5, 6, 8, 6});
  EXPECT_EQ(ix.propose(2).tokens, (v{8, 6}));  // only the 1-gram "6" occurred before
  ngram_index ix2(2, 3);
  ix2.append(v{5, 6, 8, 6});
  EXPECT_TRUE(ix2.propose(2).tokens.empty());  // 1-grams are off
}

TEST(NgramIndex, PrefersTheMostRecentOccurrence) {
  ngram_index ix(1, 2);
  ix.append(v{1, 2, 10, 1, 2, 20, 1, 2});
  EXPECT_EQ(ix.propose(1).tokens, (v{20}));
}

TEST(NgramIndex, ReportsHowFarBackTheMatchGoes) {
  ngram_index ix(1, 3);
  ix.append(v{7, 1, 2, 3, 4, 5, 6, 8, 2, 3, 4});
  // "2 3 4" matched; before it 1 != 8: three tokens agree.
  auto p = ix.propose(2);
  EXPECT_EQ(p.tokens, (v{5, 6}));
  EXPECT_EQ(p.match_len, 3u);
  // A copy that has run for a while: the whole of "1 2 3 4 5 6" agrees (7 vs 8 ends it).
  ngram_index copy(1, 3);
  copy.append(v{7, 1, 2, 3, 4, 5, 6, 9, 8, 1, 2, 3, 4, 5});
  p = copy.propose(1);
  EXPECT_EQ(p.tokens, (v{6}));
  EXPECT_EQ(p.match_len, 5u);
  // Capped at kMaxMatch.
  ngram_index longer(1, 3);
  v text;
  for (int i = 0; i < 50; ++i) text.push_back(100 + i);
  longer.append(text);
  longer.append(v{1});
  longer.append(text);
  p = longer.propose(1);
  EXPECT_EQ(p.match_len, ngram_index::kMaxMatch);
  EXPECT_EQ(p.tokens, (v{1}));
  EXPECT_EQ(ix.propose(0).match_len, 0u);
}
