// tokenizer.json's added tokens: found in the text before the model runs (leftmost, longest
// first), with their lstrip / rstrip / single_word / normalized flags, as `tokenizers`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/unicode_regex.hpp"

namespace megatron::data {

struct HfAddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A stretch of text and the added token found there (-1: ordinary text).
struct HfSegment {
  TextSpan span;
  int32_t id;
};

// The tokens matched in one of the two passes: on raw text (normalized == false) or on
// normalized text (normalized == true, matched by their normalized spelling). A byte trie, so
// that finding the longest token at a position costs the token's length, however many there are.
class HfAddedTokenMatcher {
 public:
  // Adds `token` under `spelling` (empty spellings are never matched; a spelling given twice
  // keeps the later token, as tokenizers' map does).
  void add(const std::string& spelling, const HfAddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // tokenizers' find_matches: the text cut at each match, covering it all; empty text is one
  // empty segment.
  std::vector<HfSegment> split(std::string_view text) const;

 private:
  // The longest token that starts at `at`, as (index into tokens_, length); index -1 for none.
  std::pair<int32_t, std::size_t> longest_at(std::string_view text, std::size_t at) const;

  std::vector<HfAddedToken> tokens_;
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> node; node 0 is the root
  std::vector<int32_t> token_at_{-1};            // the token ending at each node, or -1
};

}  // namespace megatron::data
