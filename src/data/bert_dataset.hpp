// A BERT split of one indexed dataset made with `megatron preprocess --split-sentences`, as
// Megatron-Core's BERTMaskedWordPieceDataset: samples of consecutive sentences of a document,
// two segments (sentence order swapped with p 0.5), `[CLS] A [SEP] B [SEP]`, masked tokens,
// padded to the sequence length.
//
// Sample i is a pure function of (dataset, split, documents, samples wanted, config) and i: the
// sample index comes from a cache file named by those inputs, and each sample draws from its
// own generator seeded with (seed + i) mod 2^32, so any layout and any worker count see the
// same samples.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "data/bert_sample_index.hpp"
#include "data/dataset_split.hpp"
#include "data/indexed_dataset.hpp"
#include "data/masked_lm.hpp"
#include "data/sample.hpp"

namespace megatron::data {

struct BertDatasetConfig {
  int64_t seq_length = 0;  // S: the sample, [CLS] and both [SEP] included
  int32_t seed = 1234;
  double short_seq_prob = 0.1;
  bool binary_head = true;  // two segments and the sentence-order target
  MaskingOptions masking;   // with the tokenizer's [CLS], [SEP], [MASK] and vocabulary size
  int32_t pad = 0;
  // Per vocabulary id: whether its piece continues a word ("##..."), for full-word masking.
  std::shared_ptr<const std::vector<bool>> continuation;
  std::filesystem::path cache_dir;  // empty: default_index_cache_dir(prefix)
};

class BertDataset final : public SampleSource {
 public:
  // Loads the split's sample index from the cache or builds and saves it. num_samples: how
  // many samples the caller will draw (whole epochs up to at least that); nullopt: one epoch.
  // Throws UserError naming the dataset when the split cannot make a sample.
  BertDataset(std::shared_ptr<const IndexedDataset> data, Split split, DocumentRange documents,
              std::optional<int64_t> num_samples, BertDatasetConfig config);
  int64_t size() const override { return samples_; }
  Sample sample(int64_t i) const override;
  // Sample i's sentences [first, end) and target length, as the index holds them.
  std::array<int64_t, 3> index_entry(int64_t i) const;
  const std::filesystem::path& cache_path() const { return cache_path_; }
  bool built_index() const { return built_; }

 private:
  std::shared_ptr<const IndexedDataset> data_;
  BertDatasetConfig config_;
  std::span<const int64_t> index_;  // 3 per sample
  std::shared_ptr<const void> storage_;
  int64_t samples_ = 0;
  std::filesystem::path cache_path_;
  bool built_ = false;
};

}  // namespace megatron::data
