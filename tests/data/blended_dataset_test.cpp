// Blending datasets by weight: Megatron's greedy schedule (exact on a worked example, within
// 1% over 10,000 samples), the per-dataset sample budget, and blends built from a data spec.
#include "data/blended_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "data/gpt_dataset_builder.hpp"
#include "gpt_test_data.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;

// A stand-in dataset of `n` samples whose sample i has the single token `tag` x 1000 + i.
class TaggedSamples final : public SampleSource {
 public:
  TaggedSamples(int32_t tag, int64_t n) : tag_(tag), n_(n) {}
  int64_t size() const override { return n_; }
  Sample sample(int64_t i) const override {
    return {.tokens = {tag_ * 1000 + static_cast<int32_t>(i)}};
  }

 private:
  int32_t tag_;
  int64_t n_;
};

TEST(BlendedDataset, WeightsAreNormalisedByTheirSum) {
  EXPECT_THAT(normalize_weights(std::vector<double>{3, 1}), ElementsAre(0.75, 0.25));
  EXPECT_THROW(normalize_weights(std::vector<double>{0, 0}), UserError);
  EXPECT_THROW(normalize_weights(std::vector<double>{1, -1}), UserError);
}

TEST(BlendedDataset, EachSampleGoesToTheDatasetFurthestBehindItsShare) {
  // Worked by hand: at sample i (x = max(i, 1)) pick the largest w x x - served.
  //   i=0 x=1: .5 .3 .2 -> 0   i=1 x=1: -.5 .3 .2 -> 1   i=2 x=2: 0 -.4 .4 -> 2
  //   i=3 x=3: .5 -.1 -.4 -> 0 i=4 x=4: 0 .2 -.2 -> 1    i=5 x=5: .5 -.5 0 -> 0
  //   i=6 x=6: 0 -.2 .2 -> 2   i=7 x=7: .5 .1 -.6 -> 0   i=8 x=8: 0 .4 -.4 -> 1
  //   i=9 x=9: .5 -.3 -.2 -> 0
  const BlendingIndices b = build_blending_indices(std::vector<double>{0.5, 0.3, 0.2}, 10);
  EXPECT_THAT(b.dataset_index, ElementsAre(0, 1, 2, 0, 1, 0, 2, 0, 1, 0));
  EXPECT_THAT(b.dataset_sample_index, ElementsAre(0, 0, 0, 1, 1, 2, 1, 3, 2, 4));
}

TEST(BlendedDataset, TiesGoToTheLowerDataset) {
  const BlendingIndices b = build_blending_indices(std::vector<double>{0.5, 0.5}, 6);
  EXPECT_THAT(b.dataset_index, ElementsAre(0, 1, 0, 1, 0, 1));
}

TEST(BlendedDataset, ProportionsStayWithinOnePercentOverTenThousandSamples) {
  const std::vector<double> weights = normalize_weights(std::vector<double>{5, 2.5, 1.5, 1});
  const BlendingIndices b = build_blending_indices(weights, 10000);
  std::vector<int64_t> counts(weights.size(), 0);
  for (const int16_t d : b.dataset_index) ++counts[d];
  for (std::size_t d = 0; d < weights.size(); ++d)
    EXPECT_NEAR(static_cast<double>(counts[d]) / 10000.0, weights[d], 0.01 * weights[d]) << d;
}

TEST(BlendedDataset, EveryDatasetIsReadInOrderFromItsFirstSample) {
  const BlendingIndices b = build_blending_indices(std::vector<double>{0.2, 0.45, 0.35}, 5000);
  std::vector<int64_t> next(3, 0);
  for (std::size_t i = 0; i < b.dataset_index.size(); ++i)
    ASSERT_EQ(b.dataset_sample_index[i], next[b.dataset_index[i]]++) << i;
}

TEST(BlendedDataset, SampleIComesFromTheScheduledDatasetAndSample) {
  const BlendedDataset blend(
      {std::make_shared<TaggedSamples>(1, 50), std::make_shared<TaggedSamples>(2, 50)},
      std::vector<double>{3, 1}, 8);
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < blend.size(); ++i) tokens.push_back(blend.sample(i).tokens[0]);
  EXPECT_THAT(tokens, ElementsAre(1000, 2000, 1001, 1002, 1003, 2001, 1004, 1005));
}

TEST(BlendedDataset, ABlendNeedingMoreThanADatasetHoldsIsRefused) {
  EXPECT_THROW(BlendedDataset(
                   {std::make_shared<TaggedSamples>(1, 2), std::make_shared<TaggedSamples>(2, 100)},
                   std::vector<double>{1, 1}, 10),
               RuntimeFailure);
}

TEST(BlendedBuilder, EachDatasetBuildsItsShareAndHalfAPercentMore) {
  const BlendSizes sizes = blend_sizes(normalize_weights(std::vector<double>{3, 7}), 1000);
  EXPECT_THAT(sizes.target, ElementsAre(300, 700));
  EXPECT_THAT(sizes.requested, ElementsAre(302, 704));  // ceil(301.5), ceil(703.5)
  EXPECT_EQ(sizes.total(), 1000);
}

TEST(BlendedBuilder, RoundingUpEachShareCanMakeTheBlendLarger) {
  const BlendSizes sizes = blend_sizes(normalize_weights(std::vector<double>{1, 1, 1}), 10);
  EXPECT_THAT(sizes.target, ElementsAre(4, 4, 4));
  EXPECT_EQ(sizes.total(), 12);
}

class BlendedBuilderData : public ::testing::Test {
 protected:
  test_support::TempDir dir;
  // Dataset a has tokens 1..300, dataset b 1001..1300, 30 documents of 10 each.
  std::string a = write_documents(dir, "a", numbered_documents(std::vector<int>(30, 10), 1));
  std::string b = write_documents(dir, "b", numbered_documents(std::vector<int>(30, 10), 1001));
  GptDatasetConfig config{.seq_length = 8, .seed = 5, .cache_dir = dir.path() / "cache"};
};

TEST_F(BlendedBuilderData, OnePrefixWithoutWeightsIsAPlainDatasetPerSplit) {
  const auto splits = build_gpt_datasets({.prefixes = {a}, .split = "8,2,0"}, {100, 10, 5}, config);
  const auto* train = dynamic_cast<const GptDataset*>(splits[0].get());
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->documents(), (DocumentRange{0, 24}));
  EXPECT_GE(train->size(), 100);
  ASSERT_NE(splits[1], nullptr);
  EXPECT_EQ(splits[2], nullptr);  // no share of the split string
}

TEST_F(BlendedBuilderData, AWeightedBlendDrawsEachDatasetInProportion) {
  const auto splits =
      build_gpt_datasets({.prefixes = {a, b}, .weights = {0.7, 0.3}, .split = "1,0,0"},
                         {1000, std::nullopt, std::nullopt}, config);
  const auto& train = *splits[0];
  ASSERT_EQ(train.size(), 1000);
  int from_b = 0;
  for (int64_t i = 0; i < train.size(); ++i) from_b += train.sample(i).tokens[0] > 1000;
  EXPECT_EQ(from_b, 300);
}

TEST_F(BlendedBuilderData, ABlendResumesExactlyAtAnySample) {
  const BlendSpec spec{.prefixes = {a, b}, .weights = {2, 1}, .split = "1,0,0"};
  const auto first = build_gpt_datasets(spec, {500, std::nullopt, std::nullopt}, config);
  std::vector<std::vector<int32_t>> served;
  for (int64_t i = 0; i < first[0]->size(); ++i) served.push_back(first[0]->sample(i).tokens);
  const auto again = build_gpt_datasets(spec, {500, std::nullopt, std::nullopt}, config);
  for (const int64_t i : {499, 250, 1, 0}) EXPECT_EQ(again[0]->sample(i).tokens, served[i]) << i;
}

TEST_F(BlendedBuilderData, WeightsWithoutASampleCountAreAUserError) {
  EXPECT_THROW(build_gpt_datasets({.prefixes = {a, b}, .weights = {1, 1}, .split = "1,1,0"},
                                  {100, std::nullopt, std::nullopt}, config),
               UserError);
}

TEST_F(BlendedBuilderData, AnUnweightedBlendWeighsDatasetsByTheirSize) {
  const std::string small =
      write_documents(dir, "small", numbered_documents(std::vector<int>(10, 10), 2001));
  const auto splits = build_gpt_datasets({.prefixes = {a, small}, .split = "1,0,0"},
                                         {50, std::nullopt, std::nullopt}, config);
  // One epoch each: (300 - 1) / 8 = 37 and (100 - 1) / 8 = 12 samples, 49 in all, so the
  // blend is capped at 49 and takes each dataset whole.
  ASSERT_EQ(splits[0]->size(), 49);
  int from_small = 0;
  for (int64_t i = 0; i < splits[0]->size(); ++i)
    from_small += splits[0]->sample(i).tokens[0] > 2000;
  EXPECT_EQ(from_small, 12);
}

}  // namespace
}  // namespace megatron::data
