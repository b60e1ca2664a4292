// Synthetic GPT samples for `data.mock: true`: walks through the vocabulary along one fixed
// affine permutation (t -> a t + b mod V, a coprime to V), jumping to a random token about
// every 16 steps. A model learns the map within tens of iterations, so the loss falls well
// below log(V) without any dataset on disk. Sample i is a pure function of (seed, split, i).
#pragma once

#include <cstdint>

#include "data/gpt_sample.hpp"

namespace megatron::train {

class MockGptSource final : public data::SampleSource {
 public:
  // split: 0 train, 1 validation, 2 test (different walks for each).
  MockGptSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split, int64_t size);
  int64_t size() const override { return size_; }
  data::Sample sample(int64_t i) const override;

 private:
  int64_t seq_length_, vocab_size_;
  uint64_t seed_;
  int split_;
  int64_t size_;
  uint64_t multiplier_ = 1, offset_ = 0;
};

}  // namespace megatron::train
