// Learning-rate schedules as Megatron's OptimizerParamScheduler: linear warmup, then constant,
// linear, cosine, inverse-square-root or warmup-stable-decay (WSD) down to min_lr.
#pragma once

#include <cstdint>

#include "optim/kinds.hpp"

namespace megatron::optim {

struct LrSchedule {
  double max_lr = 0.0;
  double min_lr = 0.0;
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;      // the decay ends here (counted from iteration 0, warmup included)
  LrDecay style = LrDecay::Cosine;
  int64_t wsd_decay_iters = 0;  // WSD: length of the final decay phase
  WsdDecay wsd_style = WsdDecay::Linear;
};

// The learning rate of the update at `iteration` (1-based: the first step of warmup already
// moves the weights by max_lr / warmup_iters).
double learning_rate(const LrSchedule& schedule, int64_t iteration);

}  // namespace megatron::optim
