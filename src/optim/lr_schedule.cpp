#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace megatron::optim {
namespace {

double wsd_coefficient(const LrSchedule& s, int64_t iteration) {
  const int64_t anneal_start = s.decay_iters - s.wsd_decay_iters;
  if (iteration <= anneal_start || s.wsd_decay_iters <= 0) return 1.0;
  const double r = double(iteration - anneal_start) / double(s.wsd_decay_iters);
  switch (s.wsd_style) {
    case WsdDecay::Linear: return 1.0 - r;
    case WsdDecay::Cosine: return 0.5 * (std::cos(std::numbers::pi * r) + 1.0);
    case WsdDecay::Exponential: return 2.0 * std::pow(0.5, r) - 1.0;
    case WsdDecay::MinusSqrt: return 1.0 - std::sqrt(r);
  }
  return 1.0;
}

}  // namespace

double learning_rate(const LrSchedule& s, int64_t iteration) {
  if (s.warmup_iters > 0 && iteration <= s.warmup_iters) {
    return s.max_lr * double(iteration) / double(s.warmup_iters);
  }
  if (s.style == LrDecay::Constant) return s.max_lr;
  if (iteration > s.decay_iters) return s.min_lr;
  if (s.style == LrDecay::InverseSquareRoot) {
    const double warmup = double(std::max<int64_t>(s.warmup_iters, 1));
    const double lr = s.max_lr * std::sqrt(warmup) / std::sqrt(double(std::max<int64_t>(iteration, 1)));
    return std::max(s.min_lr, lr);
  }
  double coefficient = 1.0;
  if (s.style == LrDecay::Wsd) {
    coefficient = wsd_coefficient(s, iteration);
  } else {
    const int64_t span = s.decay_iters - s.warmup_iters;
    const double ratio = span > 0 ? double(iteration - s.warmup_iters) / double(span) : 1.0;
    coefficient = s.style == LrDecay::Linear
                      ? 1.0 - ratio
                      : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  }
  return s.min_lr + coefficient * (s.max_lr - s.min_lr);
}

}  // namespace megatron::optim
