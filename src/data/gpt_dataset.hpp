// A GPT split of one indexed dataset, as Megatron-Core's GPTDataset: samples of S + 1 tokens
// that run across document boundaries, served in a seeded shuffled order over enough epochs.
//
// Sample i is a pure function of (dataset, split, documents, num_samples, config) and i: the
// indices come from a cache file named by exactly those inputs, so every rank, every restart
// and every resume at consumed-samples i sees the same tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/gpt_indices.hpp"
#include "data/gpt_sample.hpp"
#include "data/indexed_dataset.hpp"

namespace megatron::data {

// What Megatron's GPTDatasetConfig holds for one dataset (the blend lives elsewhere).
struct GptDatasetConfig {
  int64_t seq_length = 0;           // S
  uint64_t seed = 1234;             // the training seed
  GptSampleOptions sample;          // EOD handling for loss mask, positions, attention
  std::filesystem::path cache_dir;  // index caches; empty: default_index_cache_dir(prefix)
};

class GptDataset final : public SampleSource {
 public:
  // Loads the split's indices from the cache or builds and saves them. num_samples: how many
  // samples the caller will draw (the index holds at least that many; more when the last
  // epoch has spare tokens); nullopt builds exactly one epoch. Throws UserError naming the
  // dataset when the documents are out of range, S < 1, or samples are wanted from a split
  // with no tokens.
  GptDataset(std::shared_ptr<const IndexedDataset> data, Split split, DocumentRange documents,
             std::optional<int64_t> num_samples, GptDatasetConfig config);

  int64_t size() const override { return indices_.samples(); }
  Sample sample(int64_t i) const override;
  // The S + 1 tokens sample i is made from (sample(i) derives everything else from them).
  std::vector<int32_t> window(int64_t i) const;

  const GptIndices& indices() const { return indices_; }
  const IndexedDataset& data() const { return *data_; }
  Split split() const { return split_; }
  DocumentRange documents() const { return documents_; }
  const std::filesystem::path& cache_path() const { return cache_path_; }
  bool built_indices() const { return built_; }  // false when they came from the cache

 private:
  std::shared_ptr<const IndexedDataset> data_;
  Split split_;
  DocumentRange documents_;
  GptDatasetConfig config_;
  GptIndices indices_;
  std::filesystem::path cache_path_;
  bool built_ = false;
};

}  // namespace megatron::data
