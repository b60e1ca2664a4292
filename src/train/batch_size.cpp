#include "train/batch_size.hpp"

#include <algorithm>

namespace megatron::train {

int64_t BatchSchedule::global_batch_at(int64_t consumed) const {
  if (rampup.size() != 3) return global_batch;
  const int64_t start = rampup[0], step = rampup[1], ramp = rampup[2];
  const int64_t increments = step > 0 ? (global_batch - start) / step : 0;
  if (increments <= 0 || consumed >= ramp) return global_batch;
  const double per_increment = double(ramp) / double(increments);
  return std::min(global_batch, start + static_cast<int64_t>(double(consumed) / per_increment) * step);
}

int64_t BatchSchedule::microbatches_at(int64_t consumed) const {
  return std::max<int64_t>(1, global_batch_at(consumed) / (micro_batch * data_parallel));
}

}  // namespace megatron::train
