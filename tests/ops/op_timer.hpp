// The op harness's timer (docs/op-harness.md, mode 3): how long one call of an op takes on a
// backend. megatron-op-bench and megatron-gpu-bench's kernel rows both time through it.
#pragma once

#include <functional>
#include <limits>

#include "tensor/backend.hpp"

namespace megatron::ops_test {

struct TimerOptions {
  int warmup = 3;  // untimed calls first: caches, allocators and lazily built plans settle
  int reps = 20;   // timed calls; the median is reported
  // Stop timing once the timed calls have taken this long (at least min(3, reps) are made), so
  // that one slow op does not hold up a whole table; the warm-up stops at half of it.
  double budget_ms = std::numeric_limits<double>::infinity();
};

struct OpTiming {
  double median_ms = 0.0;
  int reps = 0;  // timed calls made: `reps`, or fewer when the budget ran out
};

// `call` timed between two marks of the backend's OpClock (the host clock on the CPU, CUDA events
// on the GPU: the clock `megatron run --profile` uses), each call followed by
// Backend::synchronize(); exceptions from `call` propagate.
OpTiming time_op(tensor::Backend& backend, const std::function<void()>& call,
                 const TimerOptions& options);

}  // namespace megatron::ops_test
