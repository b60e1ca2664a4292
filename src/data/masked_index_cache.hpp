// The sample index of a masked dataset (BERT, T5) loaded from its cache file, or built from
// the split's sentences and saved there first: what both datasets' constructors share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "data/bert_sample_index.hpp"
#include "data/dataset_split.hpp"
#include "data/indexed_dataset.hpp"

namespace megatron::data {

struct MaskedSampleIndex {
  std::span<const int64_t> entries;  // 3 per sample: first sentence, end sentence, target length
  std::shared_ptr<const void> storage;  // keeps `entries` mapped
  std::filesystem::path path;
  bool built = false;  // built by this call rather than read from the cache
  int64_t samples() const { return int64_t(entries.size() / 3); }
};

// Throws UserError when `documents` is not a range of `data`'s documents.
void check_document_range(const IndexedDataset& data, Split split, DocumentRange documents);

// `family` ("BERT", "T5") names the index in its cache file, its description and messages;
// cache_dir empty: default_index_cache_dir(prefix). Throws UserError when the split cannot make
// a sample, RuntimeFailure when a cache file is damaged.
MaskedSampleIndex load_masked_sample_index(const IndexedDataset& data, Split split,
                                           DocumentRange documents,
                                           const BertSampleIndexParams& params,
                                           const std::filesystem::path& cache_dir,
                                           const std::string& family);

}  // namespace megatron::data
