// NumPy's legacy RandomState (MT19937 seeded with an integer) for the draws Megatron's datasets
// make: random(), randint(), shuffle() of a list or array and choice() with probabilities. Each
// reproduces NumPy's algorithm, so an index or sample built here is the one Megatron builds.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace megatron::data {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  // random_sample(): 53 random bits in [0, 1).
  double random();
  // randint(low, high): uniform in [low, high), by masked rejection of 32-bit draws.
  int64_t randint(int64_t low, int64_t high);
  // shuffle(list or 1-d array): Fisher-Yates from the back with NumPy's random_interval. The
  // element type does not matter to the draws, so int32 and int64 arrays permute alike.
  template <class T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[size_t(interval(i))]);
  }
  template <class T>
  void shuffle(std::vector<T>& x) {
    shuffle(std::span<T>(x));
  }
  // geometric(p) of the legacy generator: trials to the first success, for 0 < p <= 1; by
  // inversion below p = 1/3 and by search from 1 upward above, as NumPy does.
  int64_t geometric(double p);
  // choice(len(p), p=p): the index whose cumulative probability first exceeds a uniform draw.
  size_t choice(std::span<const double> p);

 private:
  uint32_t next32() { return uint32_t(mt_()); }
  uint64_t interval(uint64_t max);  // uniform in [0, max]

  std::mt19937 mt_;  // the same initialisation as NumPy's init_genrand
};

}  // namespace megatron::data
