// Loss scaling for f16 training: Megatron's DynamicGradScaler (halve on overflow once the
// hysteresis is used up, double after `window` clean steps) or a constant scale.
#pragma once

#include <cstdint>

namespace megatron::optim {

struct LossScalerConfig {
  double initial_scale = 4294967296.0;  // 2^32
  double min_scale = 1.0;
  int64_t window = 1000;                // clean steps before the scale doubles
  int64_t hysteresis = 2;               // overflows tolerated before the scale halves
  bool dynamic = true;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {});
  double scale() const { return scale_; }
  // After each step: whether any gradient overflowed. A step that overflowed must be skipped.
  void update(bool found_overflow);

  // State a checkpoint keeps.
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t hysteresis_tracker() const { return hysteresis_tracker_; }
  void restore(double scale, int64_t growth_tracker, int64_t hysteresis_tracker);

 private:
  LossScalerConfig config_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_;
};

}  // namespace megatron::optim
