// A T5 split of one indexed dataset made with `megatron preprocess --split-sentences`, as
// Megatron-Core's T5MaskedWordPieceDataset: consecutive sentences of a document concatenated
// and truncated to the encoder length less 2, spans masked (whole words, lengths
// min(Geometric(0.2), max_ngram)), each span replaced by the next sentinel in the encoder input;
// decoder input [BOS] (sentinel, span)..., labels (sentinel, span)... [EOS].
//
// Sample i is a pure function of (dataset, split, documents, samples wanted, config) and i, as
// for BERT (bert_dataset.hpp): a cached sample index and a generator seeded with seed + i.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/indexed_dataset.hpp"
#include "data/masked_lm.hpp"
#include "data/sample.hpp"

namespace megatron::data {

struct T5DatasetConfig {
  int64_t encoder_length = 0;  // S: the encoder input, sentinels included
  int64_t decoder_length = 0;  // Sd: [BOS] + sentinels and spans (the labels: + [EOS])
  int32_t seed = 1234;
  double short_seq_prob = 0.1;
  // With the tokenizer's [CLS], [SEP] (never masked), [MASK] and vocabulary size; max_ngram 10,
  // geometric spans and no BERT replacement are what pretrain_t5.py sets.
  MaskingOptions masking;
  int32_t bos = 0, eos = 0, pad = 0;
  std::vector<int32_t> sentinels;  // one per span, in order (the tokenizer's extra ids)
  // Per vocabulary id: whether its piece continues a word ("##..."), for full-word masking.
  std::shared_ptr<const std::vector<bool>> continuation;
  std::filesystem::path cache_dir;  // empty: default_index_cache_dir(prefix)
};

class T5Dataset final : public SampleSource {
 public:
  // As BertDataset's. Throws UserError naming the dataset when the split cannot make a sample.
  T5Dataset(std::shared_ptr<const IndexedDataset> data, Split split, DocumentRange documents,
            std::optional<int64_t> num_samples, T5DatasetConfig config);
  int64_t size() const override { return samples_; }
  // Throws UserError when the sample's spans need more sentinels than the tokenizer has or more
  // decoder positions than decoder_length (Megatron asserts there), naming the setting to raise.
  Sample sample(int64_t i) const override;
  std::array<int64_t, 3> index_entry(int64_t i) const;
  const std::filesystem::path& cache_path() const { return cache_path_; }

 private:
  std::shared_ptr<const IndexedDataset> data_;
  T5DatasetConfig config_;
  std::span<const int64_t> index_;  // 3 per sample
  std::shared_ptr<const void> storage_;
  int64_t samples_ = 0;
  std::filesystem::path cache_path_;
};

}  // namespace megatron::data
