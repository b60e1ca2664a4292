// The random numbers every backend draws, defined per element index so that the CPU and the
// GPU, on any number of threads, give element i the same value for the same RngKey.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/op_params.hpp"
#include "tensor/philox.hpp"

namespace megatron::tensor {

// The four words of Philox block `block` (elements 4 * block .. 4 * block + 3).
constexpr std::array<uint32_t, 4> philox_block(RngKey key, uint64_t block) {
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(key.stream), static_cast<uint32_t>(key.stream >> 32)},
                       {static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32)});
}

// Uniform in [0, 1) for element `index`: word index % 4 of block index / 4.
constexpr float uniform_at(RngKey key, uint64_t index) {
  return uniform_from_bits(philox_block(key, index / 4)[index % 4]);
}

// Standard normal for element `index`: Box-Muller on the word pair (0, 1) or (2, 3) of its
// block; the first element of a pair takes the cosine, the second the sine.
inline float normal_at(RngKey key, uint64_t index) {
  const auto words = philox_block(key, index / 4);
  const uint64_t pair = (index % 4) / 2;
  // u1 in (0, 1] so the logarithm is finite.
  const float u1 = 1.0f - uniform_from_bits(words[2 * pair]);
  const float u2 = uniform_from_bits(words[2 * pair + 1]);
  const float radius = std::sqrt(-2.0f * std::log(u1));
  const float angle = 6.2831853071795864f * u2;
  return index % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle);
}

}  // namespace megatron::tensor
