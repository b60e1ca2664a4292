// The document, sample and shuffle indices of a GPT split, checked against hand-worked
// examples and against their defining properties (coverage, multiplicity, determinism).
#include "data/gpt_indices.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>


namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<int64_t> sorted(std::span<const int64_t> values) {
  std::vector<int64_t> out(values.begin(), values.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> out(static_cast<std::size_t>(end - begin));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

TEST(GptDatasetEpochs, EpochsAreTheFewestThatHoldNumSamplesTimesSPlusOneTokens) {
  // 100 tokens per epoch, S = 10: n samples need 10 n + 1 tokens.
  EXPECT_EQ(num_epochs_for(100, 10, 0), 1);
  EXPECT_EQ(num_epochs_for(100, 10, 9), 1);   // 91 tokens
  EXPECT_EQ(num_epochs_for(100, 10, 10), 2);  // 101: the shared extra token spills over
  EXPECT_EQ(num_epochs_for(100, 10, 19), 2);  // 191
  EXPECT_EQ(num_epochs_for(100, 10, 20), 3);  // 201
  EXPECT_EQ(num_epochs_for(7, 1000, 1), 143);
}

TEST(GptDatasetEpochs, FinalEpochIsSeparateWhenLessThan80PercentOfItIsNeeded) {
  // 100 tokens, S = 10: 9 samples per epoch, threshold int(0.8 x 9) = 7; the first epoch
  // covers (100 - 1) / 10 = 9 samples.
  const EpochPlan little = plan_epochs(100, {.seq_length = 10, .num_samples = 10});
  EXPECT_EQ(little.num_epochs, 2);
  EXPECT_TRUE(little.separate_final_epoch);  // 1 sample from the last epoch
  EXPECT_EQ(little.samples_before_final_epoch, 9);

  EXPECT_TRUE(plan_epochs(100, {.seq_length = 10, .num_samples = 15}).separate_final_epoch);
  EXPECT_FALSE(plan_epochs(100, {.seq_length = 10, .num_samples = 16}).separate_final_epoch);
  EXPECT_FALSE(plan_epochs(100, {.seq_length = 10, .num_samples = 9}).separate_final_epoch);
  EXPECT_FALSE(plan_epochs(100, {.seq_length = 10}).separate_final_epoch);  // one epoch
}

TEST(GptDatasetIndices, SampleWindowsRunAcrossDocumentsAndShareOneToken) {
  // Lengths 3, 5, 2, 4 in this order; S = 4, so each sample reads 5 tokens:
  //   flat  d0: 0 1 2 | d1: 0 1 2 3 4 | d2: 0 1 | d3: 0 1 2 3
  //   sample 0 = d0[0..2] d1[0..1]; sample 1 = d1[1..4] d2[0]; sample 2 = d2[0..1] d3[0..2]
  // 14 tokens give (14 - 1) / 4 = 3 samples.
  const std::vector<int32_t> lengths{3, 5, 2, 4};
  const std::vector<int64_t> order{0, 1, 2, 3};
  EXPECT_THAT(build_sample_index(lengths, order, 4), ElementsAre(0, 0, 1, 1, 2, 0, 3, 2));
}

TEST(GptDatasetIndices, ASampleEndingOnADocumentsLastTokenLeavesTheNextStartInIt) {
  // Lengths 4, 4; S = 3: sample 0 is all of d0, and sample 1 starts on d0's last token.
  const std::vector<int32_t> lengths{4, 4};
  const std::vector<int64_t> order{0, 1};
  EXPECT_THAT(build_sample_index(lengths, order, 3), ElementsAre(0, 0, 0, 3, 1, 2));
}

TEST(GptDatasetIndices, EmptyDocumentsAreSteppedOver) {
  const std::vector<int32_t> lengths{2, 0, 3};
  const std::vector<int64_t> order{0, 1, 2};
  EXPECT_THAT(build_sample_index(lengths, order, 2), ElementsAre(0, 0, 2, 0, 2, 2));
}

TEST(GptDatasetIndices, TheSampleIndexFollowsTheDocumentIndexOrder) {
  const std::vector<int32_t> lengths{3, 5};
  const std::vector<int64_t> order{1, 0};  // d1 first: 5 + 3 tokens, S = 2: 3 samples
  EXPECT_THAT(build_sample_index(lengths, order, 2), ElementsAre(0, 0, 0, 2, 0, 4, 1, 1));
}

TEST(GptDatasetIndices, DocumentIndexHoldsEachDocumentOncePerEpoch) {
  NumpyRandomState rng(7);
  const EpochPlan plan{.tokens_per_epoch = 1, .num_epochs = 3};
  const auto index = build_document_index({10, 15}, plan, rng);
  EXPECT_THAT(sorted(index),
              ElementsAre(10, 10, 10, 11, 11, 11, 12, 12, 12, 13, 13, 13, 14, 14, 14));
  EXPECT_NE(sorted(index), index);  // and the epochs are shuffled together
}

TEST(GptDatasetIndices, ASeparateFinalEpochIsShuffledAfterTheOthers) {
  NumpyRandomState rng(7);
  const EpochPlan plan{.tokens_per_epoch = 1, .num_epochs = 3, .separate_final_epoch = true};
  const auto index = build_document_index({0, 20}, plan, rng);
  const std::span<const int64_t> all(index);
  // The last 20 entries are exactly one epoch; the first 40 are the other two.
  EXPECT_EQ(sorted(all.subspan(40)), iota(0, 20));
  std::map<int64_t, int> counts;
  for (const int64_t d : all.first(40)) ++counts[d];
  for (int64_t d = 0; d < 20; ++d) EXPECT_EQ(counts[d], 2) << d;
}

TEST(GptDatasetIndices, ShuffleIndexPermutesEachRangeWithinItself) {
  NumpyRandomState rng(3);
  const auto index = build_shuffle_index(30, 50, rng);
  const std::span<const int64_t> all(index);
  EXPECT_EQ(sorted(all.first(30)), iota(0, 30));
  EXPECT_EQ(sorted(all.subspan(30)), iota(30, 50));
  EXPECT_NE(std::vector<int64_t>(all.begin(), all.end()), iota(0, 50));
}

TEST(GptDatasetIndices, EachSampleIsTheWindowAtKTimesSOfTheShuffledDocuments) {
  // Unequal lengths, several epochs, a separate final epoch: rebuild every window from the
  // flattened document order and compare with what the sample index points at.
  const std::vector<int32_t> lengths{5, 1, 9, 3, 0, 7, 2, 11};
  const GptIndexParams params{.seq_length = 4, .num_samples = 20, .seed = 11};
  const GptIndices idx = build_gpt_indices(lengths, {1, 8}, params);
  ASSERT_EQ(idx.plan.num_epochs, 3);              // 33 tokens per epoch, 81 needed
  std::vector<std::pair<int64_t, int64_t>> flat;  // (document-index position, offset)
  for (std::size_t p = 0; p < idx.document_index.size(); ++p)
    for (int32_t t = 0; t < lengths[idx.document_index[p]]; ++t)
      flat.emplace_back(static_cast<int64_t>(p), t);
  ASSERT_EQ(idx.samples(), (static_cast<int64_t>(flat.size()) - 1) / 4);
  for (int64_t k = 0; k <= idx.samples(); ++k) {
    EXPECT_EQ(idx.sample_index[2 * k], flat[4 * k].first) << k;
    EXPECT_EQ(idx.sample_index[2 * k + 1], flat[4 * k].second) << k;
  }
}

TEST(GptDatasetIndices, SameSeedSameIndicesOtherSeedOtherOrder) {
  const std::vector<int32_t> lengths(50, 17);
  const GptIndexParams params{.seq_length = 8, .num_samples = 300, .seed = 1234};
  const GptIndices a = build_gpt_indices(lengths, {0, 50}, params);
  const GptIndices b = build_gpt_indices(lengths, {0, 50}, params);
  EXPECT_THAT(a.document_index, ElementsAreArray(b.document_index));
  EXPECT_THAT(a.sample_index, ElementsAreArray(b.sample_index));
  EXPECT_THAT(a.shuffle_index, ElementsAreArray(b.shuffle_index));

  GptIndexParams other = params;
  other.seed = 1235;
  const GptIndices c = build_gpt_indices(lengths, {0, 50}, other);
  EXPECT_FALSE(
      std::equal(a.document_index.begin(), a.document_index.end(), c.document_index.begin()));
  EXPECT_FALSE(std::equal(a.shuffle_index.begin(), a.shuffle_index.end(), c.shuffle_index.begin()));
}

TEST(GptDatasetShuffle, PermutesAsNumpyRandomStateDoes) {
  // Golden values from numpy 2.x: r = numpy.random.RandomState(1234); a = numpy.arange(10);
  // r.shuffle(a). Megatron-Core shuffles its indices exactly so; caches and resumed runs depend
  // on this order: if it has to change, bump kGptIndexAlgorithmVersion.
  std::vector<int64_t> values = iota(0, 10);
  NumpyRandomState rng(1234);
  rng.shuffle(values);
  EXPECT_THAT(values, ElementsAre(7, 2, 9, 1, 0, 8, 4, 5, 6, 3));
}

TEST(GptDatasetShuffle, ShufflesOneAfterAnotherContinueOneStream) {
  // numpy: r = RandomState(7); a = arange(10, 25, dtype=int32); r.shuffle(a); b = arange(6);
  // r.shuffle(b) -- as the document index (int32) and then the shuffle index are drawn.
  std::vector<int32_t> a(15);
  for (int32_t i = 0; i < 15; ++i) a[i] = 10 + i;
  std::vector<int64_t> b = iota(0, 6);
  NumpyRandomState rng(7);
  rng.shuffle(a);
  rng.shuffle(b);
  EXPECT_THAT(a, ElementsAre(18, 15, 20, 12, 22, 10, 11, 24, 23, 17, 21, 13, 16, 19, 14));
  EXPECT_THAT(b, ElementsAre(1, 2, 3, 5, 4, 0));
}

}  // namespace
}  // namespace megatron::data
