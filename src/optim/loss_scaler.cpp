#include "optim/loss_scaler.hpp"

#include <algorithm>

namespace megatron::optim {

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config), scale_(config.initial_scale), hysteresis_tracker_(config.hysteresis) {}

void LossScaler::update(bool found_overflow) {
  if (!config_.dynamic) return;
  if (found_overflow) {
    growth_tracker_ = 0;
    if (--hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * 0.5, config_.min_scale);
    return;
  }
  if (++growth_tracker_ == config_.window) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= 2.0;
  }
}

void LossScaler::restore(double scale, int64_t growth_tracker, int64_t hysteresis_tracker) {
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  hysteresis_tracker_ = hysteresis_tracker;
}

}  // namespace megatron::optim
