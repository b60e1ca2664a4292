// The second half of BPE training: from word counts to a byte-level BPE vocabulary, by merging
// the most frequent adjacent pair of tokens again and again (Sennrich et al. 2016, GPT-2).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/bpe_merge.hpp"
#include "data/bpe_word_counts.hpp"

namespace megatron::data {

struct BpeTrainOptions {
  int64_t vocab_size = 0;     // tokens in all: 256 bytes + learned ones + "<|endoftext|>"
  int64_t min_frequency = 2;  // a pair seen fewer times than this is never merged
};

struct BpeVocabulary {
  // The raw bytes of each token, by id: the 256 single bytes in GPT-2's vocabulary order
  // (gpt2_byte_order), then each learned token in the order it was learned. "<|endoftext|>"
  // is not here; it takes the next id when the files are written.
  std::vector<std::string> tokens;
  std::vector<BpeMerge> merges;  // best first

  bool operator==(const BpeVocabulary&) const = default;
};

struct BpeTrainProgress {
  int64_t merges = 0;
  int64_t tokens = 0;         // tokens.size() so far
  int64_t target_tokens = 0;  // vocab_size - 1
  double seconds = 0;
};

// Learns merges until the vocabulary has vocab_size tokens with "<|endoftext|>", or no pair
// occurs min_frequency times. Each step merges the pair with the highest count (summed over
// words, weighted by word count), ties going to the smaller (left id, right id), which is
// also Hugging Face's rule; in a word the pair is merged left to right without overlap. Two
// merges can spell the same token ("a bc", "ab c"): like Hugging Face, the second reuses the
// token's id, so there may be more merges than learned tokens. The result depends only on
// the counts, not on the order of `words`. Throws UserError for vocab_size < 257 or
// min_frequency < 1. `progress`, when given, is called about twice a second.
// Throws the UserError train_bpe would throw for `options`, so that a caller can refuse bad
// options before reading its corpus.
void check_bpe_train_options(const BpeTrainOptions& options);

BpeVocabulary train_bpe(std::span<const WordCount> words, const BpeTrainOptions& options,
                        const std::function<void(const BpeTrainProgress&)>& progress = {});

}  // namespace megatron::data
