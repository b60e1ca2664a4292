// From a data blend (prefixes, optional weights, split string) and the samples each split needs
// to the dataset each split draws from, following Megatron-Core's BlendedMegatronDatasetBuilder,
// for any dataset kind (GPT, BERT).
//
// One prefix without weights gives a plain dataset; otherwise every prefix contributes a
// dataset per split and a BlendedDataset mixes them.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/gpt_dataset.hpp"

namespace megatron::data {

// Megatron's mid_level_dataset_surplus: each dataset builds this fraction more samples than the
// blend is expected to take from it, so the greedy schedule never runs one dry.
inline constexpr double kBlendSurplus = 0.005;

// Megatron's _get_size_per_split_per_dataset for one split: target[d] = ceil(size x w[d]) is
// what the blend takes; requested[d] = ceil(target[d] x (1 + surplus)) is what dataset d builds.
// The blend's own size is the sum of the targets, which can exceed `size` by rounding.
struct BlendSizes {
  std::vector<int64_t> target;
  std::vector<int64_t> requested;
  int64_t total() const;  // sum of target
};
BlendSizes blend_sizes(std::span<const double> normalized_weights, int64_t size,
                       double surplus = kBlendSurplus);

struct BlendSpec {
  std::vector<std::string> prefixes;  // indexed datasets, path without .bin/.idx
  // One per prefix; empty means Megatron's "no weights": each dataset builds one epoch and
  // the blend weighs them by their sample counts.
  std::vector<double> weights;
  std::string split = "969,30,1";
  // When > 0, every token id of every dataset is checked to lie in [0, vocab_size) as it is
  // opened (check_token_ids): a dataset from another tokenizer stops before any index is built.
  int64_t vocab_size = 0;
};

// For each split (train, valid, test) the samples it needs, or nullopt for one epoch.
using SplitSizes = std::array<std::optional<int64_t>, 3>;

// How to make one dataset kind's split of one indexed dataset.
struct DatasetFactory {
  // What the split string divides: sequences (GPT) or documents (BERT, whose samples keep
  // within a document).
  std::function<int64_t(const IndexedDataset&)> elements;
  // The split's dataset over `range` of those elements; nullopt samples: one epoch.
  std::function<std::shared_ptr<const SampleSource>(std::shared_ptr<const IndexedDataset>, Split,
                                                    DocumentRange, std::optional<int64_t>)>
      make;
};

// The dataset each split draws from; null for a split whose share of the split string is 0.
// Throws UserError for a malformed blend (weights not matching prefixes, weights without a
// size for a split, several unweighted prefixes without a size), a corrupt dataset, or a token
// id outside spec.vocab_size.
std::array<std::shared_ptr<const SampleSource>, 3> build_datasets(const BlendSpec& spec,
                                                                  const SplitSizes& sizes,
                                                                  const DatasetFactory& factory);
std::array<std::shared_ptr<const SampleSource>, 3> build_gpt_datasets(
    const BlendSpec& spec, const SplitSizes& sizes, const GptDatasetConfig& config);

}  // namespace megatron::data
