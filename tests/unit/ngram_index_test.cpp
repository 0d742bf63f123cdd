#include <gtest/gtest.h>

#include "engine/ngram_index.h"

using tandem::ngram_index;
using v = std::vector<int32_t>;

TEST(NgramIndex, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  ngram_index ix(1, 3);
  ix.append(v{1, 2, 3, 4, 5, 9, 9, 1, 2, 3});
  EXPECT_EQ(ix.propose(2), (v{4, 5}));
  EXPECT_EQ(ix.propose(10), (v{4, 5, 9, 9, 1, 2, 3}));  // bounded by the history
  ix.append(v{7});
  EXPECT_TRUE(ix.propose(3).empty());  // "7" never occurred before
  ix.append(v{1, 2});
  EXPECT_EQ(ix.propose(1), (v{3}));     // the latest "1 2" was followed by 3 ... and "7 1 2" is new
}

TEST(NgramIndex, FallsBackToShorterNgrams) {
  ngram_index ix(1, 3);
  ix.append(v{5, 6, 8, 6});
  EXPECT_EQ(ix.propose(2), (v{8, 6}));  // only the 1-gram "6" occurred before
  ngram_index ix2(2, 3);
  ix2.append(v{5, 6, 8, 6});
  EXPECT_TRUE(ix2.propose(2).empty());  // 1-grams are off
}

TEST(NgramIndex, PrefersTheMostRecentOccurrence) {
  ngram_index ix(1, 2);
  ix.append(v{1, 2, 10, 1, 2, 20, 1, 2});
  EXPECT_EQ(ix.propose(1), (v{20}));
}
