// Documents packed into sequences, as the attention tests give them to the kernels: each row's
// first visible key (AttentionOptions::first_keys) from each sequence's document starts.
#pragma once

#include <cstdint>
#include <vector>

namespace megatron::test_support {

// starts[b]: the ascending first positions of sequence b's documents (0 first).
inline std::vector<int64_t> first_keys_of(int64_t seq, const std::vector<std::vector<int64_t>>& starts) {
  std::vector<int64_t> out;
  for (const auto& doc : starts) {
    int64_t current = 0;
    size_t next = 0;
    for (int64_t t = 0; t < seq; ++t) {
      while (next < doc.size() && doc[next] <= t) current = doc[next++];
      out.push_back(current);
    }
  }
  return out;
}

}  // namespace megatron::test_support
