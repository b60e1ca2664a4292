#include "data/seeded_shuffle.hpp"

#include <utility>

namespace megatron::data {

uint64_t ShuffleRng::below(uint64_t bound) {
  // (0 - bound) % bound is 2^64 mod bound computed in unsigned arithmetic.
  const uint64_t reject_below = (0 - bound) % bound;
  for (;;) {
    const uint64_t draw = engine_();
    if (draw >= reject_below) return draw % bound;
  }
}

void seeded_shuffle(std::span<int64_t> values, ShuffleRng& rng) {
  for (std::size_t i = values.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace megatron::data
