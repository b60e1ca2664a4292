// `megatron data inspect` as a call: an indexed dataset's counts, token type, sequence lengths
// and token-id statistics, and its first document decoded when a tokenizer is named.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "data/tokenizer.hpp"

namespace megatron::data {

// Ids from this one on are counted together, not given a slot each: a corrupt or foreign
// dataset's id of 2^31 must not cost 16 GB.
inline constexpr int32_t kCountedIds = 1 << 22;

struct TokenStats {
  int64_t tokens = 0;
  int64_t shortest = 0, longest = 0;  // sequence lengths
  int32_t min_id = 0, max_id = 0;     // meaningful when tokens > 0
  int64_t distinct = 0;               // ids in [0, kCountedIds) that occur
  int64_t negative = 0;               // occurrences of ids below 0
  int64_t huge = 0;                   // occurrences of ids from kCountedIds on
  // Up to ten (id, count), the most frequent first, the lower id first on ties.
  std::vector<std::pair<int64_t, int64_t>> most_frequent;
};

TokenStats token_stats(const IndexedDataset& dataset);

struct DatasetInspectJob {
  std::string prefix;  // without .bin/.idx
  // When set, called for the tokenizer that decodes the first document (only if there is one).
  std::function<std::unique_ptr<Tokenizer>()> tokenizer;
};

// Writes the report to `out`; the dataset's own errors (UserError) when it cannot be opened.
void inspect_dataset(const DatasetInspectJob& job, std::ostream& out);

}  // namespace megatron::data
