// Internal to the CPU backend: runs of consecutive dropout uniforms (uniform_at of consecutive
// element indices), computed a Philox block at a time so that the rounds vectorise.
#pragma once

#include <cstdint>

#include "tensor/backend.hpp"
#include "tensor/philox.hpp"

namespace megatron::tensor::cpu {

// The longest run one call draws: the attention kernels' key blocks are this wide.
inline constexpr int64_t kMaxUniforms = 64;

// out[i] = uniform_at(key, first + i) for i < n <= kMaxUniforms, computing each Philox block once
// and the blocks side by side (structure of arrays) so that the rounds vectorise.
inline void block_uniforms(RngKey key, uint64_t first, int64_t n, float* out) {
  constexpr int kMaxBlocks = kMaxUniforms / 4 + 1;
  const uint64_t block0 = first / 4;
  const int blocks = static_cast<int>((first + static_cast<uint64_t>(n) + 3) / 4 - block0);
  uint32_t w0[kMaxBlocks], w1[kMaxBlocks], w2[kMaxBlocks], w3[kMaxBlocks];
  for (int i = 0; i < blocks; ++i) {
    const uint64_t block = block0 + static_cast<uint64_t>(i);
    w0[i] = static_cast<uint32_t>(block);
    w1[i] = static_cast<uint32_t>(block >> 32);
    w2[i] = static_cast<uint32_t>(key.stream);
    w3[i] = static_cast<uint32_t>(key.stream >> 32);
  }
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int i = 0; i < blocks; ++i) {
      const uint64_t p0 = uint64_t{0xD2511F53u} * w0[i];
      const uint64_t p1 = uint64_t{0xCD9E8D57u} * w2[i];
      w0[i] = static_cast<uint32_t>(p1 >> 32) ^ w1[i] ^ k0;
      w1[i] = static_cast<uint32_t>(p1);
      w2[i] = static_cast<uint32_t>(p0 >> 32) ^ w3[i] ^ k1;
      w3[i] = static_cast<uint32_t>(p0);
    }
  }
  const uint32_t* words[4] = {w0, w1, w2, w3};
  const uint64_t skip = first - block0 * 4;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t w = skip + static_cast<uint64_t>(i);
    out[i] = uniform_from_bits(words[w % 4][w / 4]);
  }
}

}  // namespace megatron::tensor::cpu
