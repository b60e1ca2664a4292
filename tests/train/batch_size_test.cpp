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

}  // namespace
}  // namespace megatron::train
