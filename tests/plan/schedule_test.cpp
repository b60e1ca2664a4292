// The pipeline schedule's summary: names from the recipe, and the bubble fraction from
// simulating every stage's program (the closed form only for programs too long to simulate).
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace schedule_test {

using testing::make_gpt;
using testing::rederive;

Schedule schedule_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm")).schedule;
}

TEST(Schedule, OneFOneBBubbleIsPMinus1OverMPlusPMinus1) {
  // p = 16, m = 64: 15 / 79.
  const auto compiled = make_gpt({.layers = 32, .global_batch = 64, .pipeline = 16});
  const Schedule schedule = schedule_of(compiled);
  EXPECT_EQ(schedule.name, "1f1b");
  EXPECT_EQ(schedule.microbatches, 64);
  EXPECT_TRUE(schedule.bubble_simulated);
  EXPECT_NEAR(schedule.bubble_fraction, 15.0 / 79.0, 1e-12);
}

TEST(Schedule, InterleavingDividesTheBubbleByTheChunks) {
  // p = 4, v = 3, m = 16: 3 / (3 x 16 + 3).
  const auto compiled = make_gpt({.global_batch = 16, .pipeline = 4, .virtual_pipeline = 3});
  const Schedule schedule = schedule_of(compiled);
  EXPECT_EQ(schedule.name, "interleaved");
  EXPECT_NEAR(schedule.bubble_fraction, 3.0 / (3 * 16 + 3), 1e-12);
}

TEST(Schedule, AllForwardAllBackwardHasThe1F1BBubble) {
  auto compiled = make_gpt({.global_batch = 8, .pipeline = 2});
  compiled.recipe.parallel.schedule = recipe::Schedule::AllForwardAllBackward;
  rederive(compiled);
  const Schedule schedule = schedule_of(compiled);
  EXPECT_EQ(schedule.name, "all-forward-all-backward");
  EXPECT_NEAR(schedule.bubble_fraction, 1.0 / 9.0, 1e-12);
}

TEST(Schedule, OneStageHasNoBubble) {
  EXPECT_DOUBLE_EQ(schedule_of(make_gpt({.global_batch = 8})).bubble_fraction, 0.0);
}

TEST(Schedule, MicroBatchesAreGlobalOverMicroTimesDataParallel) {
  EXPECT_EQ(schedule_of(make_gpt({.micro_batch = 2, .global_batch = 64, .data = 4})).microbatches,
            8);
}

TEST(Schedule, CarriesWhatEachStagesProgramIsMadeFrom) {
  const Schedule schedule =
      schedule_of(make_gpt({.global_batch = 16, .pipeline = 4, .virtual_pipeline = 3}));
  EXPECT_EQ(schedule.kind, recipe::Schedule::Interleaved);
  EXPECT_EQ(schedule.chunks, 3);
  EXPECT_EQ(schedule.microbatches, 16);
}

TEST(Schedule, ProgramsTooLongToSimulateUseTheClosedForm) {
  // p = 2, m = 4,194,304: 2^24 ops, more than the simulation runs.
  const auto compiled = make_gpt({.global_batch = 4'194'304, .pipeline = 2});
  const Schedule schedule = schedule_of(compiled);
  EXPECT_FALSE(schedule.bubble_simulated);
  EXPECT_DOUBLE_EQ(schedule.bubble_fraction, 1.0 / 4'194'305.0);
}

}  // namespace schedule_test
}  // namespace megatron::plan
