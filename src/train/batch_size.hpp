// The global batch of each iteration under Megatron's batch-size ramp-up, and how it divides
// into micro-batches.
#pragma once

#include <cstdint>
#include <vector>

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
};

}  // namespace megatron::train
