#include "train/mock_data.hpp"

#include <vector>

#include "tensor/philox.hpp"

namespace megatron::train {

namespace {
constexpr int64_t kMinPhrase = 4, kMaxPhrase = 16;
}

MockGptSource::MockGptSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split,
                             int64_t size)
    : seq_length_(seq_length), vocab_size_(vocab_size), seed_(seed), split_(split), size_(size) {}

data::GptSample MockGptSource::sample(int64_t i) const {
  const tensor::PhiloxKey key{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
  auto words = [&](uint64_t block) {
    return tensor::philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                  static_cast<uint32_t>(i), static_cast<uint32_t>(split_ + 16)},
                                 key);
  };
  const int64_t phrase = kMinPhrase + int64_t(words(0)[0] % uint32_t(kMaxPhrase - kMinPhrase + 1));
  std::vector<int32_t> tokens(static_cast<size_t>(phrase));
  for (int64_t k = 0; k < phrase; ++k) {
    tokens[size_t(k)] = static_cast<int32_t>(words(1 + uint64_t(k))[1] % uint32_t(vocab_size_));
  }
  std::vector<int32_t> window(static_cast<size_t>(seq_length_ + 1));
  for (size_t t = 0; t < window.size(); ++t) window[t] = tokens[t % tokens.size()];
  return data::make_gpt_sample(window, {});
}

}  // namespace megatron::train
