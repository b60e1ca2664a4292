// Megatron's batch-size ramp-up (--rampup-batch-size start increment samples): the global
// batch after a number of consumed samples, and the iterations <-> samples walk over it.
// The one place the rule lives: the recipe compiler derives training lengths from it and the
// trainer sizes each iteration with it.
#pragma once

#include <cstdint>

namespace megatron::recipe {

struct BatchRamp {
  int64_t global_batch = 0;  // B, reached once `samples` have been consumed
  int64_t start = 0;         // first batch
  int64_t increment = 0;     // the batch grows by this ...
  int64_t samples = 0;       // ... every samples / ((B - start) / increment) consumed samples

  // The batch of the iteration that starts after `consumed` samples.
  int64_t batch_at(int64_t consumed) const;
  // Iterations until at least `target` samples have been consumed.
  int64_t iterations_for(int64_t target) const;
  // Samples consumed after `iterations` iterations; a UserError if that overflows.
  int64_t samples_after(int64_t iterations) const;
};

}  // namespace megatron::recipe
