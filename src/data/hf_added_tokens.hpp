// tokenizer.json's added tokens: found in the text before the model runs (leftmost, longest
// first), with their lstrip / rstrip / single_word / normalized flags, as `tokenizers`.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
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
// normalized text (normalized == true, matched by their normalized spelling).
class HfAddedTokenMatcher {
 public:
  void add(std::string spelling, const HfAddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // tokenizers' find_matches: the text cut at each match, covering it all; empty text is one
  // empty segment.
  std::vector<HfSegment> split(std::string_view text) const;

 private:
  struct Entry {
    std::string spelling;
    HfAddedToken token;
  };
  std::vector<Entry> tokens_;
  std::array<std::vector<std::size_t>, 256> by_first_byte_;  // longest first
};

}  // namespace megatron::data
