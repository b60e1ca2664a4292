#include <gtest/gtest.h>

#include "train/mock_data.hpp"

namespace megatron::train {
namespace {

using M = MockBertSource;

TEST(MockBert, SamplesAreClsASepBSepThenPaddingWithSegmentIds) {
  const M source(32, 100, 7, 0, 50, true);
  for (int64_t i = 0; i < 50; ++i) {
    const data::Sample s = source.sample(i);
    ASSERT_EQ(s.tokens.size(), 32u);
    const auto valid = size_t(s.valid_length);
    ASSERT_GE(valid, 5u);
    EXPECT_EQ(s.tokens[0], M::kCls);
    EXPECT_EQ(s.tokens[valid - 1], M::kSep);
    int seps = 0;
    for (size_t p = 0; p < valid; ++p) seps += s.tokens[p] == M::kSep;
    EXPECT_EQ(seps, 2) << i;
    for (size_t p = valid; p < 32; ++p) EXPECT_EQ(s.tokens[p], M::kPad);
    EXPECT_EQ(s.token_types[0], 0);
    EXPECT_EQ(s.token_types[valid - 1], 1);
    EXPECT_TRUE(s.sentence_order == 0 || s.sentence_order == 1);
  }
}

TEST(MockBert, OnlyWordPositionsAreScoredAndTheirLabelsAreWords) {
  const M source(64, 100, 3, 0, 200, true);
  int64_t scored = 0, words = 0, masked = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const data::Sample s = source.sample(i);
    for (size_t p = 0; p < s.tokens.size(); ++p) {
      if (s.loss_mask[p] > 0) {
        ++scored;
        EXPECT_GE(s.labels[p], M::kFirstWord);
        masked += s.tokens[p] == M::kMask;
      } else {
        EXPECT_EQ(s.labels[p], 0);
      }
      if (p < size_t(s.valid_length) && s.tokens[p] != M::kCls && s.tokens[p] != M::kSep) ++words;
    }
  }
  EXPECT_NEAR(double(scored) / double(words), 0.15, 0.02);  // Megatron's mask_prob
  EXPECT_NEAR(double(masked) / double(scored), 0.8, 0.05);  // of which [MASK]
}

TEST(MockBert, ASampleIsAFunctionOfSeedSplitAndIndex) {
  const M a(32, 100, 7, 0, 10, true), b(32, 100, 7, 0, 10, true), valid(32, 100, 7, 1, 10, true);
  EXPECT_EQ(a.sample(3).tokens, b.sample(3).tokens);
  EXPECT_NE(a.sample(3).tokens, valid.sample(3).tokens);
}

TEST(MockBert, WithoutTheBinaryHeadThereIsNoSentenceOrder) {
  EXPECT_EQ(M(32, 100, 7, 0, 10, false).sample(0).sentence_order, -1);
}

}  // namespace
}  // namespace megatron::train
