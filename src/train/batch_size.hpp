// The global batch of each iteration under Megatron's batch-size ramp-up, and how it divides
// into micro-batches. The ramp rule itself is recipe::BatchRamp, shared with the compiler.
#pragma once

#include <cstdint>
#include <vector>

#include "recipe/batch_ramp.hpp"

namespace megatron::train {

struct BatchSchedule {
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t data_parallel = 1;
  std::vector<int64_t> rampup;  // [start, increment, ramp samples]; empty = none

  // Global batch size once `consumed_samples` have been trained on.
  int64_t global_batch_at(int64_t consumed_samples) const;
  // Micro-batches each data-parallel rank runs for that batch.
  int64_t microbatches_at(int64_t consumed_samples) const;
  // Samples consumed after `iterations` iterations, in steps of whole stretches of equal
  // batches (not one per iteration); a UserError if the count passes 64 bits.
  int64_t samples_after(int64_t iterations) const;

 private:
  recipe::BatchRamp ramp() const;
};

}  // namespace megatron::train
