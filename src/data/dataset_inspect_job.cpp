#include "data/dataset_inspect_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace megatron::data {

TokenStats token_stats(const IndexedDataset& ds) {
  TokenStats s;
  const auto lengths = ds.sequence_lengths();
  s.shortest = lengths.empty() ? 0 : lengths[0];
  for (auto n : lengths) {
    s.tokens += n;
    s.shortest = std::min<int64_t>(s.shortest, n);
    s.longest = std::max<int64_t>(s.longest, n);
  }
  // One flat count per id: a std::map insertion per token made this minutes on large data.
  std::vector<int64_t> counts;
  int32_t min_id = std::numeric_limits<int32_t>::max(),
          max_id = std::numeric_limits<int32_t>::min();
  for (int64_t i = 0; i < ds.sequences(); ++i)
    for (auto id : ds.tokens(i)) {
      min_id = std::min(min_id, id);
      max_id = std::max(max_id, id);
      if (id < 0) {
        ++s.negative;
        continue;
      }
      if (id >= kCountedIds) {
        ++s.huge;
        continue;
      }
      if (static_cast<std::size_t>(id) >= counts.size())
        counts.resize(static_cast<std::size_t>(id) + 1);
      ++counts[static_cast<std::size_t>(id)];
    }
  s.min_id = min_id;
  s.max_id = max_id;
  std::vector<std::pair<int64_t, int64_t>> by_count;  // (-count, id): sorts most frequent first
  for (std::size_t id = 0; id < counts.size(); ++id)
    if (counts[id]) by_count.emplace_back(-counts[id], static_cast<int64_t>(id));
  s.distinct = static_cast<int64_t>(by_count.size());
  std::sort(by_count.begin(), by_count.end());
  for (std::size_t i = 0; i < std::min<std::size_t>(10, by_count.size()); ++i)
    s.most_frequent.emplace_back(by_count[i].second, -by_count[i].first);
  return s;
}

void inspect_dataset(const DatasetInspectJob& job, std::ostream& out) {
  const IndexedDataset ds(job.prefix);
  const TokenStats s = token_stats(ds);
  out << fmt::format("dataset     {}\n", job.prefix)
      << fmt::format("token type  {} ({} bytes)\n", token_type_name(ds.token_type()),
                     token_size(ds.token_type()))
      << fmt::format("documents   {}\nsequences   {}\ntokens      {}\n", ds.documents(),
                     ds.sequences(), s.tokens)
      << fmt::format("sequence length  min {}, mean {:.1f}, max {}\n", s.shortest,
                     ds.sequences() ? double(s.tokens) / ds.sequences() : 0.0, s.longest);
  if (s.tokens > 0) {
    out << fmt::format(
        "token ids   min {}, max {}, {} distinct{}{}\nmost frequent", s.min_id, s.max_id,
        s.distinct, s.negative ? fmt::format(" ({} negative ids)", s.negative) : "",
        s.huge ? fmt::format(" ({} ids >= {}, not counted)", s.huge, kCountedIds) : "");
    for (const auto& [id, count] : s.most_frequent) out << fmt::format(" {}:{}", id, count);
    out << "\n";
  }
  if (job.tokenizer && ds.documents() > 0) {
    const std::unique_ptr<Tokenizer> tokenizer = job.tokenizer();
    const auto docs = ds.document_indices();
    std::vector<int32_t> ids;
    for (int64_t i = docs[0]; i < docs[1]; ++i) {
      auto t = ds.tokens(i);
      ids.insert(ids.end(), t.begin(), t.end());
    }
    out << "first document:\n" << tokenizer->decode(ids) << "\n";
  }
}

}  // namespace megatron::data
