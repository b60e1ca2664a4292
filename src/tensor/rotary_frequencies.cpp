#include "tensor/rotary_frequencies.hpp"

#include <cmath>
#include <numbers>

namespace megatron::tensor {

std::vector<double> rotary_frequencies(const RotaryOptions& options) {
  const int64_t half = options.rotary_dim / 2;
  std::vector<double> frequency(static_cast<size_t>(half > 0 ? half : 0));
  const RotaryScaling& s = options.scaling;
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
    }
    frequency[static_cast<size_t>(i)] = f;
  }
  return frequency;
}

}  // namespace megatron::tensor
