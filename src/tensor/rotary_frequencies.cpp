#include "tensor/rotary_frequencies.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace megatron::tensor {

std::vector<double> rotary_frequencies(const RotaryOptions& options) {
  const int64_t half = options.rotary_dim / 2;
  std::vector<double> frequency(static_cast<size_t>(half > 0 ? half : 0));
  const RotaryScaling& s = options.scaling;
  // YaRN: channel pairs below `low` keep their frequency, those past `high` are divided by the
  // factor, a linear ramp between (transformers' find_correction_range and linear_ramp_factor).
  double low = 0.0, high = 0.0;
  if (s.kind == RotaryScaling::Kind::Yarn) {
    const double dim = static_cast<double>(options.rotary_dim);
    const auto correction_dim = [&](double rotations) {
      return dim * std::log(s.original_max_positions / (rotations * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(options.base));
    };
    low = correction_dim(s.beta_fast);
    high = correction_dim(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;
  }
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(options.base, -2.0 * static_cast<double>(i) / static_cast<double>(options.rotary_dim));
    if (s.kind == RotaryScaling::Kind::Linear) {
      f /= s.factor;
    } else if (s.kind == RotaryScaling::Kind::Llama3) {
      const double wavelength = 2.0 * std::numbers::pi / f;
      const double low_wavelength = s.original_max_positions / s.low_freq_factor;
      const double high_wavelength = s.original_max_positions / s.high_freq_factor;
      if (wavelength > low_wavelength) {
        f /= s.factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth = (s.original_max_positions / wavelength - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    } else if (s.kind == RotaryScaling::Kind::Yarn) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double kept = 1.0 - ramp;  // transformers' inv_freq_extrapolation_factor
      f = f / s.factor * (1.0 - kept) + f * kept;
    }
    frequency[static_cast<size_t>(i)] = f;
  }
  return frequency;
}

}  // namespace megatron::tensor
