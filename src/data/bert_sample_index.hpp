// The sample index of Megatron's masked datasets (helpers.cpp build_mapping): consecutive
// sentences of one document grouped up to a target length, some targets shortened at random,
// over as many epochs as the samples wanted need, then shuffled. Same generators and order as
// Megatron's, so the index is the one Megatron builds for the same data and seed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.hpp"

namespace megatron::data {

// Megatron skips every document holding a sentence longer than this.
inline constexpr int32_t kLongSentenceTokens = 512;

struct BertSampleIndexParams {
  int64_t max_samples = 0;           // epochs are added until at least this many; 0: one epoch
  int32_t target_length = 0;         // tokens of sentences per sample (seq_length - 3 for BERT)
  double short_seq_prob = 0.1;       // P(a sample's target is drawn in [2, target_length])
  int32_t seed = 1234;               // Megatron's int: 0 to 2^31 - 1
  int32_t min_sentences = 2;         // 2 with the binary head (two segments), else 1
};

// Each sample: (first sentence, end sentence (exclusive), target length), 3 int64 per sample.
struct BertSampleIndex {
  std::vector<int64_t> entries;
  int64_t samples() const { return int64_t(entries.size() / 3); }
};

// No document of a split can make a sample (then no number of epochs gives any).
class NoBertSamples : public UserError {
 public:
  using UserError::UserError;
};

// document_bounds: the split's document boundaries into the sentences (d + 1 entries for d
// documents); sentence_lengths: every sentence's tokens, indexed globally. Throws UserError when
// no document of the split can make a sample (then no number of epochs gives any).
BertSampleIndex build_bert_sample_index(std::span<const int64_t> document_bounds,
                                        std::span<const int32_t> sentence_lengths,
                                        const BertSampleIndexParams& params);

}  // namespace megatron::data
