// Masked-language-model predictions as Megatron's MaskedWordPieceDataset makes them: word
// candidates (whole words when full-word masking), n-gram spans with P(n) ∝ 1/n (or, for T5,
// min(Geometric(0.2), max_ngram)), a budget of mask_prob of the tokens, and each chosen token
// replaced: BERT's [MASK] (80%), a random id (10%) or itself (10%); T5's always [MASK]. The
// draws follow Megatron's order on a NumPy-compatible generator.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/numpy_random.hpp"

namespace megatron::data {

struct MaskingOptions {
  double mask_prob = 0.15;
  int32_t max_ngram = 3;
  bool full_word = true;         // a "##" piece joins the word before it
  bool longer_ngrams = false;    // P(n) ∝ n instead of 1/n
  bool geometric = false;        // n = min(Geometric(0.2), max_ngram) (SpanBERT; T5)
  bool bert_replacement = true;  // 80/10/10 as above; false: always [MASK], no draws (T5)
  int32_t cls = 0, sep = 0, mask = 0;
  int64_t vocab_size = 0;        // random replacements are drawn from [0, vocab_size)
};

struct MaskedTokens {
  std::vector<int32_t> tokens;     // with the replacements
  std::vector<int64_t> positions;  // ascending
  std::vector<int32_t> labels;     // the original ids there
  // Each masked n-gram's positions (ascending within a span), the spans ordered by their first
  // position: T5 replaces each span by one sentinel.
  std::vector<std::vector<int64_t>> spans;
};

// is_continuation(id): whether the vocabulary spells the piece with a leading "##".
MaskedTokens mask_tokens(const std::vector<int32_t>& tokens, int64_t target_length,
                         const MaskingOptions& options,
                         const std::function<bool(int32_t)>& is_continuation,
                         NumpyRandomState& random);

}  // namespace megatron::data
