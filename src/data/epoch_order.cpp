#include "data/epoch_order.hpp"

#include <random>
#include <utility>

namespace megatron::data {

std::vector<int32_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  std::mt19937_64 rng(seed * 1000003u + uint64_t(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = int64_t(rng() % uint64_t(i + 1));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

}  // namespace megatron::data
