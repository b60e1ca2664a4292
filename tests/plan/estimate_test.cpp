// The estimate: step time from FLOPs and bandwidths, MFU, and what it says when a plan does
// not fit (warnings, and suggestions re-planned with each change).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace estimate_test {

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

// A profile whose every kernel runs at `rate` FLOP/s, with memory traffic and kernel overheads
// free: the step is then the kernels' FLOPs over the rate.
HardwareProfile flat_profile(double rate) {
  HardwareProfile p = h100();
  p.memory_bandwidth = 1e30;
  p.kernel_overhead_s = 0;
  for (KernelRates* rates : {&p.rates_16bit, &p.rates_32bit}) {
    rates->gemm = {{{1}, {1}, {1}}, {rate}};
    rates->attention_forward = {{{1}, {1}}, {rate}};
    rates->attention_backward = {{{1}, {1}}, {rate}};
  }
  return p;
}

TEST(Estimate, OneRankStepIsItsKernelsFlopsOverTheirRates) {
  // GPT with flash attention: the GEMMs count 2mnk; causal attention executes about half its
  // score blocks, so it runs half of Megatron's full-square attention FLOPs.
  const auto compiled = make_gpt({.layers = 2, .global_batch = 8, .flash_attention = true});
  const Plan plan = make_plan(compiled, flat_profile(1e14));
  const double b = 1, s = 2048, h = 2048, a = 16, d = 128, layers = 2, m = 8;
  const double square = 4 * b * s * s * a * d;   // Megatron's attention core, one forward
  const double causal = 4 * b * a * d * s * (s + 1) / 2;
  const double gemms = plan.flops.hardware_per_iteration - 3 * layers * m * square;
  const double attention = layers * m * 3.5 * causal;  // forward, then backward at 2.5x
  EXPECT_NEAR(plan.estimate.step_time_s, (gemms + attention) / 1e14, 1e-9 * plan.estimate.step_time_s);
}

TEST(Estimate, WithoutMeasuredRatesGemmsRunAtTheAchievableFractionOfPeak) {
  // Large GEMMs are far above the memory roofline, so the datasheet fallback is peak x
  // achievable_fraction; causal flash attention executes about half its FLOPs, and without
  // memory traffic nothing else adds time.
  HardwareProfile only_gemms = h100();
  only_gemms.memory_bandwidth = 1e30;
  const Plan plan = make_plan(make_gpt({.global_batch = 8, .flash_attention = true}), only_gemms);
  EXPECT_GT(plan.estimate.step_time_s, 0.9 * plan.flops.hardware_per_iteration / (989e12 * 0.55));
  EXPECT_LT(plan.estimate.step_time_s, plan.flops.hardware_per_iteration / (989e12 * 0.55));
  EXPECT_DOUBLE_EQ(plan.estimate.communication_time_s, 0);
}

TEST(Estimate, ComputeSplitsIntoKernelKindsThatAddUpToIt) {
  const Plan plan = make_plan(make_gpt({.layers = 4, .global_batch = 8, .tensor = 2, .pipeline = 2,
                                        .flash_attention = true}),
                              h100());
  const Estimate& e = plan.estimate;
  for (double part : {e.gemm_time_s, e.attention_time_s, e.memory_time_s, e.optimizer_time_s})
    EXPECT_GT(part, 0);
  EXPECT_NEAR(e.gemm_time_s + e.attention_time_s + e.memory_time_s + e.overhead_time_s +
                  e.optimizer_time_s,
              e.compute_time_s, 1e-12 * e.compute_time_s);
}

TEST(Estimate, F32UsesThe32BitRates) {
  HardwareProfile p = flat_profile(1e14);
  p.rates_32bit = flat_profile(1e13).rates_32bit;
  const auto f32 = make_gpt({.global_batch = 8, .dtype = recipe::DType::F32});
  const auto bf16 = make_gpt({.global_batch = 8});
  EXPECT_NEAR(make_plan(f32, p).estimate.step_time_s,
              10 * make_plan(bf16, p).estimate.step_time_s, 1e-6);
}

TEST(Estimate, SlowerSmallGemmsInTheProfileSlowASmallModelMore) {
  // A measured grid where GEMMs reach a tenth of the rate of 4096 x 4096 x 4096 at the other
  // corners: the smaller the dimensions, the slower.
  HardwareProfile p = flat_profile(1e14);
  p.rates_16bit.gemm = {{{64, 4096}, {64, 4096}, {64, 4096}},
                        {1e13, 1e13, 1e13, 1e13, 1e13, 1e13, 1e13, 1e14}};
  const auto small = make_gpt({.layers = 2, .hidden = 256, .heads = 2, .seq_length = 128,
                               .vocab = 1024, .global_batch = 8});
  const auto large = make_gpt({.layers = 2, .global_batch = 8});
  const double small_ratio = make_plan(small, p).estimate.step_time_s /
                             make_plan(small, flat_profile(1e14)).estimate.step_time_s;
  const double large_ratio = make_plan(large, p).estimate.step_time_s /
                             make_plan(large, flat_profile(1e14)).estimate.step_time_s;
  EXPECT_GT(small_ratio, 5);
  EXPECT_GT(small_ratio, 2 * large_ratio);
}

TEST(Estimate, MemoryTrafficAndKernelOverheadsAddToTheStep) {
  HardwareProfile slow_memory = flat_profile(1e14);
  slow_memory.memory_bandwidth = 1e9;
  HardwareProfile overheads = flat_profile(1e14);
  overheads.kernel_overhead_s = 1e-3;
  const auto compiled = make_gpt({.layers = 2, .global_batch = 8});
  const double flat = make_plan(compiled, flat_profile(1e14)).estimate.step_time_s;
  EXPECT_GT(make_plan(compiled, slow_memory).estimate.step_time_s, flat + 1);
  // 8 micro-batches x 2 layers x (12 forward + 24 backward kernels) at 1 ms, at least.
  EXPECT_GT(make_plan(compiled, overheads).estimate.step_time_s, flat + 8 * 2 * 36e-3);
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

}  // namespace estimate_test
}  // namespace megatron::plan
