// GPT-2's pre-tokenizer: splits text into the words BPE runs on, with exactly the semantics of
// OpenAI's regex, written by hand because regex engines are slow and std::regex has no \p{..}.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace megatron::data {

// Yields the matches of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// left to right; together they cover every byte of the text once, in order. Contractions are
// case-sensitive with ASCII apostrophe only, the optional leading space is U+0020 only, and a
// whitespace run followed by non-whitespace leaves its last character to the next match.
// Bytes that are not valid UTF-8 count as "other" (neither letter, number nor space), one at a
// time, exactly as unicode::decode splits them.
class Gpt2PreTokenizer {
 public:
  explicit Gpt2PreTokenizer(std::string_view text) : text_(text) {}

  // Sets `word` to the next pre-token (never empty); false once the text is used up.
  bool next(std::string_view& word);

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

// All pre-tokens of `text`, in order (views into `text`); for tests and --show-tokens.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace megatron::data
