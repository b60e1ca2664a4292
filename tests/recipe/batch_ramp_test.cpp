// Megatron's batch ramp-up, walked a stretch of equal batches at a time: the same answers as
// stepping one iteration at a time, in steps bounded by the number of distinct batches.
#include "recipe/batch_ramp.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace megatron::recipe {
namespace {

// The definition: one iteration at a time.
int64_t iterations_one_by_one(const BatchRamp& r, int64_t target) {
  int64_t consumed = 0, iterations = 0;
  while (consumed < target) {
    consumed += r.batch_at(consumed);
    ++iterations;
  }
  return iterations;
}

int64_t samples_one_by_one(const BatchRamp& r, int64_t iterations) {
  int64_t consumed = 0;
  for (int64_t i = 0; i < iterations; ++i) consumed += r.batch_at(consumed);
  return consumed;
}

TEST(BatchRamp, GrowsByTheIncrementEverySliceOfTheRamp) {
  // From 8 to 32 in steps of 8: 3 increments over 300 samples, one every 100.
  const BatchRamp r{.global_batch = 32, .start = 8, .increment = 8, .samples = 300};
  EXPECT_EQ(r.batch_at(0), 8);
  EXPECT_EQ(r.batch_at(99), 8);
  EXPECT_EQ(r.batch_at(100), 16);
  EXPECT_EQ(r.batch_at(250), 24);
  EXPECT_EQ(r.batch_at(300), 32);
}

TEST(BatchRamp, WithoutARampEveryBatchIsTheGlobalBatch) {
  const BatchRamp r{.global_batch = 32};
  EXPECT_EQ(r.batch_at(0), 32);
  EXPECT_EQ(r.iterations_for(65), 3);
  EXPECT_EQ(r.samples_after(3), 96);
}

TEST(BatchRamp, WalkingByStretchesAgreesWithWalkingOneIterationAtATime) {
  for (const BatchRamp r :
       {BatchRamp{.global_batch = 32, .start = 8, .increment = 8, .samples = 300},
        BatchRamp{.global_batch = 1536, .start = 16, .increment = 16, .samples = 58593},
        BatchRamp{.global_batch = 100, .start = 1, .increment = 3, .samples = 7},
        BatchRamp{.global_batch = 97, .start = 1, .increment = 1, .samples = 1000},
        BatchRamp{.global_batch = 64, .start = 4, .increment = 12, .samples = 333}}) {
    for (int64_t target : {1, 7, 99, 100, 101, 299, 300, 301, 5000, 123457}) {
      EXPECT_EQ(r.iterations_for(target), iterations_one_by_one(r, target))
          << r.global_batch << " " << target;
    }
    for (int64_t n : {0, 1, 2, 10, 57, 1000})
      EXPECT_EQ(r.samples_after(n), samples_one_by_one(r, n)) << r.global_batch << " " << n;
  }
}

TEST(BatchRamp, IterationsForAndSamplesAfterAreInverse) {
  const BatchRamp r{
      .global_batch = 1'000'000, .start = 1, .increment = 1, .samples = 1'000'000'000'000'000};
  const int64_t target = 900'000'000'000'000;
  const int64_t n = r.iterations_for(target);
  EXPECT_LT(r.samples_after(n - 1), target);
  EXPECT_GE(r.samples_after(n), target);
}

TEST(BatchRamp, SamplesPast64BitsAreAUserError) {
  const BatchRamp r{.global_batch = 100'000'000};
  EXPECT_THROW(r.samples_after(1'000'000'000'000'000), UserError);
}

}  // namespace
}  // namespace megatron::recipe
