// Philox4x32-10, the counter-based RNG of Salmon et al. (SC'11) that cuRAND also uses: the
// same (key, counter) gives the same numbers on the CPU and the GPU, in any execution order.
#pragma once

#include <array>
#include <cstdint>

namespace megatron::tensor {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32: four 32-bit random words for one (counter, key).
constexpr std::array<uint32_t, 4> philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = uint64_t{kMul0} * counter[0];
    const uint64_t p1 = uint64_t{kMul1} * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return counter;
}

// A uniform float in [0, 1) from the top 24 bits of a random word (every value exact in f32).
constexpr float uniform_from_bits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

}  // namespace megatron::tensor
