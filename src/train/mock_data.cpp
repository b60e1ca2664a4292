#include "train/mock_data.hpp"

#include <numeric>
#include <vector>

#include "tensor/philox.hpp"

namespace megatron::train {
namespace {

std::array<uint32_t, 4> words(uint64_t seed, uint64_t a, uint64_t b) {
  return tensor::philox4x32_10(
      {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
       static_cast<uint32_t>(b >> 32)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

constexpr uint32_t kJumpOneIn = 16;

}  // namespace

MockGptSource::MockGptSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split,
                             int64_t size)
    : seq_length_(seq_length), vocab_size_(vocab_size), seed_(seed), split_(split), size_(size) {
  // The permutation belongs to the seed, not the split: validation tests the same map.
  const auto w = words(seed, ~0ull, ~0ull);
  const uint64_t v = uint64_t(vocab_size);
  multiplier_ = 1 + w[0] % std::max<uint64_t>(v - 1, 1);
  while (std::gcd(multiplier_, v) != 1) ++multiplier_;
  offset_ = w[1] % v;
}

data::Sample MockGptSource::sample(int64_t i) const {
  const uint64_t v = uint64_t(vocab_size_);
  std::vector<int32_t> window(static_cast<size_t>(seq_length_ + 1));
  const uint64_t stream = (uint64_t(split_) << 48) ^ uint64_t(i);
  uint64_t token = 0;
  for (size_t t = 0; t < window.size(); ++t) {
    const auto w = words(seed_, stream, t);
    token = (t == 0 || w[0] % kJumpOneIn == 0) ? w[1] % v : (multiplier_ * token + offset_) % v;
    window[t] = static_cast<int32_t>(token);
  }
  return data::make_gpt_sample(window, {});
}

}  // namespace megatron::train
