#include "train/batch_size.hpp"

#include <algorithm>

namespace megatron::train {

recipe::BatchRamp BatchSchedule::ramp() const {
  if (rampup.size() != 3) return {.global_batch = global_batch};
  return {.global_batch = global_batch,
          .start = rampup[0],
          .increment = rampup[1],
          .samples = rampup[2]};
}

int64_t BatchSchedule::global_batch_at(int64_t consumed) const { return ramp().batch_at(consumed); }

int64_t BatchSchedule::microbatches_at(int64_t consumed) const {
  return std::max<int64_t>(1, global_batch_at(consumed) / (micro_batch * data_parallel));
}

int64_t BatchSchedule::samples_after(int64_t iterations) const {
  return ramp().samples_after(iterations);
}

}  // namespace megatron::train
