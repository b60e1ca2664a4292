#include "recipe/batch_ramp.hpp"

#include <algorithm>
#include <limits>

#include "core/checked.hpp"

namespace megatron::recipe {
namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

struct Position {
  int64_t consumed = 0;
  int64_t iterations = 0;
};

// The first consumed count after `consumed` at which the batch is no longer `batch`: the
// closed form guessed in floating point, then nudged so it agrees with batch_at exactly.
int64_t next_change(const BatchRamp& r, int64_t consumed, int64_t batch) {
  const int64_t increments = (r.global_batch - r.start) / r.increment;
  const double per_increment = double(r.samples) / double(increments);
  const int64_t step = (batch - r.start) / r.increment;
  const double guess = std::min(double(step + 1) * per_increment, double(r.samples));
  int64_t c = std::max(consumed + 1, static_cast<int64_t>(guess));
  while (c - 1 > consumed && r.batch_at(c - 1) != batch) --c;
  while (c < r.samples && r.batch_at(c) == batch) ++c;
  return std::max(c, consumed + 1);
}

// Iterations run until `target` samples are consumed or `budget` iterations have run. It
// moves a stretch of equal batches at a time, so its steps are at most the number of distinct
// batches (about (B - start) / increment), whatever the number of samples or iterations.
Position walk(const BatchRamp& r, int64_t target, int64_t budget) {
  Position at;
  while (at.consumed < target && at.iterations < budget) {
    const int64_t batch = r.batch_at(at.consumed);
    const int64_t change =
        batch >= r.global_batch ? kUnbounded : next_change(r, at.consumed, batch);
    const int64_t goal = std::min(target, change);
    const int64_t n = std::min(ceil_div(goal - at.consumed, batch), budget - at.iterations);
    at.consumed = checked_add(
        at.consumed, checked_mul(n, batch, "the samples trained on (iterations x global batch)"),
        "the samples trained on (iterations x global batch)");
    at.iterations += n;
  }
  return at;
}

}  // namespace

int64_t BatchRamp::batch_at(int64_t consumed) const {
  if (increment <= 0 || start <= 0 || start >= global_batch) return global_batch;
  const int64_t increments = (global_batch - start) / increment;
  if (increments <= 0 || consumed >= samples) return global_batch;
  const double per_increment = double(samples) / double(increments);
  // consumed < samples keeps steps at most `increments`, so the product stays below B.
  const auto steps = static_cast<int64_t>(double(consumed) / per_increment);
  return std::min(global_batch, start + steps * increment);
}

int64_t BatchRamp::iterations_for(int64_t target) const {
  return walk(*this, target, kUnbounded).iterations;
}

int64_t BatchRamp::samples_after(int64_t iterations) const {
  return walk(*this, kUnbounded, iterations).consumed;
}

}  // namespace megatron::recipe
