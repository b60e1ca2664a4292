#include "data/numpy_random.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace megatron::data {
namespace {

uint64_t mask_for(uint64_t max) {
  uint64_t mask = max;
  for (int shift : {1, 2, 4, 8, 16, 32}) mask |= mask >> shift;
  return mask;
}

}  // namespace

double NumpyRandomState::random() {
  const uint32_t a = next32() >> 5, b = next32() >> 6;
  return (double(a) * 67108864.0 + double(b)) / 9007199254740992.0;
}

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  const uint64_t mask = mask_for(max);
  if (max > 0xffffffffull) {
    // NumPy draws 64 bits here; no list Megatron shuffles comes near 2^32 entries.
    throw std::length_error("NumpyRandomState: interval beyond 32 bits");
  }
  uint64_t value;
  while ((value = (next32() & mask)) > max) {
  }
  return value;
}

int64_t NumpyRandomState::randint(int64_t low, int64_t high) {
  if (high <= low) throw std::invalid_argument("NumpyRandomState::randint: empty range");
  const uint64_t range = uint64_t(high - 1 - low);
  if (range == 0) return low;
  if (range == 0xffffffffull) return low + int64_t(next32());
  return low + int64_t(interval(range));
}

int64_t NumpyRandomState::geometric(double p) {
  if (!(p > 0.0 && p <= 1.0)) throw std::invalid_argument("NumpyRandomState::geometric: p outside (0, 1]");
  if (p >= 1.0 / 3.0) {
    int64_t x = 1;
    double sum = p, prod = p;
    const double q = 1.0 - p, u = random();
    while (u > sum) {
      prod *= q;
      sum += prod;
      ++x;
    }
    return x;
  }
  return int64_t(std::ceil(std::log1p(-random()) / std::log(1.0 - p)));
}

size_t NumpyRandomState::choice(std::span<const double> p) {
  // NumPy: cdf = p.cumsum(); cdf /= cdf[-1]; searchsorted(cdf, random_sample(), 'right').
  std::vector<double> cdf(p.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) cdf[i] = sum += p[i];
  for (double& c : cdf) c /= sum;
  const double u = random();
  return size_t(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

}  // namespace megatron::data
