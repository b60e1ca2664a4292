// The estimate: step time from FLOPs and bandwidths, MFU, and what it says when a plan does
// not fit (warnings, and suggestions re-planned with each change).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::gpt3_175b;
using testing::make_gpt;
using ::testing::StartsWith;

const HardwareProfile& h100() { return find_hardware("h100-sxm"); }

std::string in_gib(double bytes) {
  return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
}


// ---- Time ------------------------------------------------------------------------------

TEST(Estimate, OneRankStepIsHardwareFlopsOverSustainedPeak) {
  // No communication and no bubble: only the GEMMs at achievable_fraction of peak.
  const Plan plan = make_plan(make_gpt({.global_batch = 8}), h100());
  EXPECT_DOUBLE_EQ(plan.estimate.step_time_s, plan.flops.hardware_per_iteration / (989e12 * 0.55));
  EXPECT_DOUBLE_EQ(plan.estimate.communication_time_s, 0);
}

TEST(Estimate, F32UsesThe32BitPeak) {
  const Plan plan = make_plan(make_gpt({.global_batch = 8, .dtype = recipe::DType::F32}), h100());
  EXPECT_DOUBLE_EQ(plan.estimate.step_time_s,
                   plan.flops.hardware_per_iteration / (494.5e12 * 0.55));
}

TEST(Estimate, MfuIsModelFlopsOverStepTimeWorldAndPeak) {
  const Plan plan = make_plan(gpt3_175b(8, 16, 8), h100());
  EXPECT_DOUBLE_EQ(plan.estimate.mfu,
                   plan.flops.model_per_iteration / (plan.estimate.step_time_s * 1024 * 989e12));
  EXPECT_GT(plan.estimate.mfu, 0.2);
  EXPECT_LT(plan.estimate.mfu, 0.55);  // never above the achievable fraction
}

TEST(Estimate, TokensPerSecondAreTokensPerIterationOverStepTime) {
  const Plan plan = make_plan(gpt3_175b(8, 16, 8), h100());
  EXPECT_DOUBLE_EQ(plan.estimate.tokens_per_second, 1536.0 * 2048 / plan.estimate.step_time_s);
}

TEST(Estimate, PipelineBubbleStretchesTheStep) {
  const Plan plan = make_plan(gpt3_175b(8, 16, 8), h100());
  EXPECT_GE(plan.estimate.step_time_s,
            plan.estimate.compute_time_s / (1 - plan.schedule.bubble_fraction));
}

TEST(Estimate, NamesTheHardwareProfile) {
  EXPECT_EQ(make_plan(make_gpt({.global_batch = 8}), find_hardware("A100")).estimate.hardware,
            "a100-80gb");
}

// ---- Fitting ---------------------------------------------------------------------------

TEST(Estimate, SmallModelFitsWithoutWarningsOrSuggestions) {
  const Plan plan = make_plan(make_gpt({.global_batch = 8, .flash_attention = true}), h100());
  EXPECT_TRUE(plan.estimate.fits);
  EXPECT_THAT(plan.estimate.warnings, IsEmpty());
  EXPECT_THAT(plan.estimate.suggestions, IsEmpty());
}

TEST(Estimate, Gpt3_175bOnOneH100DoesNotFitAndSaysHowMuchItNeeds) {
  const Plan plan = make_plan(gpt3_175b(1, 1, 1), h100());
  EXPECT_FALSE(plan.estimate.fits);
  ASSERT_EQ(plan.estimate.warnings.size(), 1u);
  EXPECT_EQ(plan.estimate.warnings[0], "stage 0 needs " + in_gib(plan.peak_rank.total()) +
                                           " per rank, the h100-sxm has 79.6 GiB");
}

TEST(Estimate, Gpt3_175bOnOneRankSuggestsRecomputeAndALongerPipeline) {
  // One GPU: no data-parallel ranks to shard the optimizer over, no node room for tensor
  // parallelism, so neither is suggested.
  const Plan plan = make_plan(gpt3_175b(1, 1, 1), h100());
  EXPECT_THAT(plan.estimate.suggestions,
              ElementsAre(StartsWith("training.recompute=selective (stage 0: "),
                          StartsWith("training.recompute=full (stage 0: "),
                          StartsWith("parallel.pipeline=2 on 2 GPUs (stage 0: ")));
}

TEST(Estimate, SuggestionsCarryThePeakTheChangedRecipeWouldHave) {
  // 175B on tp 8, pp 8, dp 16: stage 0 holds 12 layers and 8 micro-batches' activations.
  const auto compiled = gpt3_175b(8, 8, 16);
  const Plan plan = make_plan(compiled, h100());
  ASSERT_FALSE(plan.estimate.fits);
  auto changed = compiled;
  changed.recipe.parallel.distributed_optimizer = true;
  const Plan other = make_plan(changed, h100());
  EXPECT_THAT(plan.estimate.suggestions,
              ::testing::Contains("parallel.distributed_optimizer=true (stage 0: " +
                                  in_gib(other.peak_rank.total()) + ", fits)"));
}

TEST(Estimate, WhenNoSingleChangeFitsACombinationThatFitsIsSuggested) {
  // 175B on tp 8, pp 2, dp 8 (128 GPUs): no one change brings stage 0 under 80 GB.
  const Plan plan = make_plan(gpt3_175b(8, 2, 8), find_hardware("a100-80gb"));
  ASSERT_FALSE(plan.estimate.fits);
  for (const std::string& suggestion : plan.estimate.suggestions)
    if (!suggestion.starts_with("together: "))
      EXPECT_THAT(suggestion, ::testing::Not(::testing::HasSubstr("fits"))) << suggestion;
  ASSERT_FALSE(plan.estimate.suggestions.empty());
  EXPECT_THAT(plan.estimate.suggestions.back(), StartsWith("together: "));
  EXPECT_THAT(plan.estimate.suggestions.back(), ::testing::EndsWith(", fits)"));
}

TEST(Estimate, SuggestionsOnlyListChangesThatLowerThePeak) {
  const Plan plan = make_plan(gpt3_175b(8, 8, 16), h100());
  for (const std::string& suggestion : plan.estimate.suggestions) {
    SCOPED_TRACE(suggestion);
    const auto at = suggestion.find(": ") + 2;
    EXPECT_LT(std::stod(suggestion.substr(at)), plan.peak_rank.total() / (1024.0 * 1024 * 1024));
  }
  EXPECT_THAT(plan.estimate.suggestions,
              ::testing::Contains(StartsWith("parallel.sequence_parallel=true")));
  EXPECT_THAT(plan.estimate.suggestions, ::testing::Contains(StartsWith("parallel.pipeline=16 (")));
}

TEST(Estimate, TensorParallelismIsNotSuggestedBeyondANode) {
  const Plan plan = make_plan(gpt3_175b(8, 8, 16), h100());  // 8 GPUs per node already used
  for (const std::string& suggestion : plan.estimate.suggestions)
    EXPECT_THAT(suggestion, ::testing::Not(StartsWith("parallel.tensor=")));
}

TEST(Estimate, WarnsWhenTensorParallelGroupsSpanNodes) {
  const Plan plan = make_plan(
      make_gpt({.global_batch = 8, .tensor = 16, .flash_attention = true, .gpus_per_node = 8}),
      h100());
  EXPECT_THAT(
      plan.estimate.warnings,
      ::testing::Contains(HasSubstr("parallel.tensor=16 does not stay inside a node of 8 GPUs")));
}

}  // namespace
}  // namespace megatron::plan
