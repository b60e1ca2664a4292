// Blending several GPT datasets by weight, as Megatron-Core's BlendedDataset: a deterministic
// greedy schedule says, for each blended sample, which dataset serves it and which of its samples.
//
// No randomness: the schedule depends only on the weights and the size, so it is never cached
// (building it is one pass over the samples; docs/datasets.md has the numbers).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "data/gpt_sample.hpp"

namespace megatron::data {

// Each weight divided by their sum (Megatron's normalize). Throws UserError when a weight is
// negative or not finite, or when they sum to zero.
std::vector<double> normalize_weights(std::span<const double> weights);

struct BlendingIndices {
  std::vector<int16_t> dataset_index;         // (size) which dataset serves blended sample i
  std::vector<int64_t> dataset_sample_index;  // (size) which sample of that dataset
};

// Megatron's build_blending_indices: for sample i, with x = max(i, 1), pick the dataset d whose
// error weights[d] x x - served[d] is largest (the lowest d on ties), then serve its next
// sample. weights must be normalised; at most 32,767 datasets (the index is int16).
BlendingIndices build_blending_indices(std::span<const double> weights, int64_t size);

class BlendedDataset final : public SampleSource {
 public:
  // weights are normalised here (again, as Megatron does, so a blend built from already
  // normalised weights gives bit-identical ratios). Throws RuntimeFailure when the schedule
  // needs more samples from a dataset than it holds.
  BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> datasets,
                 std::span<const double> weights, int64_t size);

  int64_t size() const override { return static_cast<int64_t>(indices_.dataset_index.size()); }
  Sample sample(int64_t i) const override;

  struct Source {
    int dataset;
    int64_t sample;
  };
  Source source(int64_t i) const;  // where blended sample i comes from

  const std::vector<double>& weights() const { return weights_; }
  const BlendingIndices& indices() const { return indices_; }

 private:
  std::vector<std::shared_ptr<const SampleSource>> datasets_;
  std::vector<double> weights_;
  BlendingIndices indices_;
};

}  // namespace megatron::data
