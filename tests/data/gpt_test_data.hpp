// Tiny indexed datasets for the GPT dataset tests, written with the real writer in a TempDir:
// documents are given token by token, or as lengths filled with tokens unique per position.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {

using Documents = std::vector<std::vector<int32_t>>;

// Writes `documents` (one sequence each) as uint16 dataset `name` in `dir`; returns the prefix.
inline std::string write_documents(const test_support::TempDir& dir, const std::string& name,
                                   const Documents& documents) {
  const std::string prefix = (dir.path() / name).string();
  IndexedDatasetWriter writer(prefix, TokenType::U16);
  for (const auto& doc : documents) {
    writer.add_sequence(doc);
    writer.end_document();
  }
  writer.finish();
  return prefix;
}

// Documents of the given lengths whose tokens are first, first + 1, ... across all documents,
// so every token names its position in the corpus and coverage can be counted exactly.
inline Documents numbered_documents(const std::vector<int>& lengths, int32_t first = 1) {
  Documents docs;
  int32_t next = first;
  for (const int n : lengths) {
    docs.emplace_back();
    for (int j = 0; j < n; ++j) docs.back().push_back(next++);
  }
  return docs;
}

inline std::shared_ptr<const IndexedDataset> open_dataset(const std::string& prefix) {
  return std::make_shared<const IndexedDataset>(prefix);
}

}  // namespace megatron::data
