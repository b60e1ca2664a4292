// The one random permutation every dataset index uses: Fisher-Yates driven by std::mt19937_64,
// written out so the same seed gives the same order on every compiler, library and platform.
//
// Why not std::shuffle or std::uniform_int_distribution: the standard fixes mt19937_64's output
// bit for bit but leaves both of those algorithms to the implementation, so libstdc++ and libc++
// would order samples differently. Megatron uses numpy's RandomState; matching it bit for bit is
// not a goal (docs/datasets.md), determinism across platforms is.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace megatron::data {

class ShuffleRng {
 public:
  explicit ShuffleRng(uint64_t seed) : engine_(seed) {}

  // Uniform integer in [0, bound), bound > 0. Rejection sampling: draws below 2^64 mod bound
  // are redrawn so that every residue is equally likely (no modulo bias).
  uint64_t below(uint64_t bound);

 private:
  std::mt19937_64 engine_;
};

// Permutes `values` in place: for i from the end down to 1, swap values[i] with values[j],
// j uniform in [0, i]. Consumes exactly one accepted draw per position, so shuffles made one
// after another from the same ShuffleRng form a reproducible sequence.
void seeded_shuffle(std::span<int64_t> values, ShuffleRng& rng);

}  // namespace megatron::data
