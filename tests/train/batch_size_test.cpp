#include "train/batch_size.hpp"

#include <gtest/gtest.h>

namespace megatron::train {
namespace {

TEST(BatchSchedule, WithoutRampUpEveryIterationUsesTheGlobalBatch) {
  const BatchSchedule s{.global_batch = 32, .micro_batch = 8};
  EXPECT_EQ(s.global_batch_at(0), 32);
  EXPECT_EQ(s.microbatches_at(1000), 4);
}

TEST(BatchSchedule, RampUpGrowsByTheIncrementEverySliceOfTheRampAsMegatron) {
  // From 8 to 32 in steps of 8: 3 increments over 300 samples, one every 100.
  const BatchSchedule s{.global_batch = 32, .micro_batch = 4, .rampup = {8, 8, 300}};
  EXPECT_EQ(s.global_batch_at(0), 8);
  EXPECT_EQ(s.global_batch_at(99), 8);
  EXPECT_EQ(s.global_batch_at(100), 16);
  EXPECT_EQ(s.global_batch_at(250), 24);
  EXPECT_EQ(s.global_batch_at(300), 32);
  EXPECT_EQ(s.microbatches_at(100), 4);
}

TEST(BatchSchedule, MicroBatchesDivideByTheDataParallelRanks) {
  const BatchSchedule s{.global_batch = 64, .micro_batch = 4, .data_parallel = 2};
  EXPECT_EQ(s.microbatches_at(0), 8);
}

TEST(BatchSchedule, SamplesAfterIterationsAddEachIterationsBatch) {
  const BatchSchedule s{.global_batch = 32, .micro_batch = 4, .rampup = {8, 8, 300}};
  int64_t consumed = 0;
  for (int i = 0; i < 40; ++i) consumed += s.global_batch_at(consumed);
  EXPECT_EQ(s.samples_after(40), consumed);
}

TEST(BatchSchedule, SamplesAfterAHugeIterationCountAreCountedWithoutWalkingThem) {
  const BatchSchedule s{.global_batch = 1536, .micro_batch = 1, .rampup = {16, 16, 5'859'375}};
  const int64_t iterations = 1'000'000'000'000;
  const int64_t ramp_iterations = 50'000;  // past the ramp: its 5,859,375 samples take ~20,000
  int64_t consumed = 0;
  for (int64_t i = 0; i < ramp_iterations; ++i) consumed += s.global_batch_at(consumed);
  EXPECT_EQ(s.samples_after(iterations), consumed + (iterations - ramp_iterations) * 1536);
}

}  // namespace
}  // namespace megatron::train
