// BERT's text normalisation and pre-tokenisation, exactly as Hugging Face's BertNormalizer and
// BertPreTokenizer do them: raw UTF-8 text in, the words that WordPiece then splits into pieces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

// The words of one text, stored back to back in `chars` (normalised UTF-8); word i spans
// [ends[i-1], ends[i]). One flat buffer rather than a vector of strings: a caller can reuse it
// across texts and a long document costs no allocation per word.
struct BertWords {
  std::string chars;
  std::vector<std::size_t> ends;

  std::size_t size() const { return ends.size(); }
  std::string_view word(std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(chars).substr(begin, ends[i] - begin);
  }
  void clear() {
    chars.clear();
    ends.clear();
  }
};

// Replaces `out` with the words of `text`. The steps, in Hugging Face's order:
//  1. clean: drop U+0000, U+FFFD and "other" characters (Cc, Cf, Co; \t \n \r excepted), then
//     turn every White_Space character into a space;
//  2. put spaces around each CJK ideograph (Hugging Face's ranges);
//  3. when lower_case: strip accents (NFD, then drop Mn), then lowercase;
//  4. split on whitespace and isolate each punctuation character: Unicode P* and the ASCII
//     symbols ($ + < = > ^ ` | ~ and the rest of 33-47, 58-64, 91-96, 123-126).
// Invalid UTF-8 bytes (which Hugging Face cannot even accept) read as U+FFFD and so vanish.
// Thread-safe: touches nothing but its arguments.
void bert_pretokenize(std::string_view text, bool lower_case, BertWords& out);

}  // namespace megatron::data
