// The op harness's timer: how many calls it makes, what it reports, and when it stops early.
#include "ops/op_timer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tensor/cpu_backend.hpp"

namespace megatron::ops_test {
namespace {

using std::chrono::milliseconds;

TEST(OpTimer, MakesTheWarmupCallsUntimedThenRepsTimedCalls) {
  tensor::CpuBackend backend(1);
  int calls = 0;
  const OpTiming t = time_op(backend, [&] { ++calls; }, {.warmup = 2, .reps = 5});
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(t.reps, 5);
}

TEST(OpTimer, ReportsTheMedianCallSoOneSlowCallDoesNotMoveIt) {
  tensor::CpuBackend backend(1);
  int calls = 0;
  // The third of three timed calls takes 200 ms: the mean would be over 66 ms, the median is the
  // others' microseconds.
  const OpTiming t = time_op(backend,
                             [&] {
                               if (++calls == 3) std::this_thread::sleep_for(milliseconds(200));
                             },
                             {.warmup = 0, .reps = 3});
  EXPECT_LT(t.median_ms, 30.0);
}

TEST(OpTimer, StopsAfterThreeTimedCallsOnceTheBudgetIsSpent) {
  tensor::CpuBackend backend(1);
  int calls = 0;
  const OpTiming t = time_op(backend,
                             [&] {
                               ++calls;
                               std::this_thread::sleep_for(milliseconds(2));
                             },
                             {.warmup = 0, .reps = 50, .budget_ms = 1.0});
  EXPECT_EQ(t.reps, 3);
  EXPECT_EQ(calls, 3);
  EXPECT_GE(t.median_ms, 2.0);
}

}  // namespace
}  // namespace megatron::ops_test
