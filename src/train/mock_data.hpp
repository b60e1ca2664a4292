// Synthetic samples for `data.mock: true`: walks through the vocabulary along one fixed affine
// permutation (t -> a t + b mod V, a coprime to V), jumping to a random token about every 16
// steps. A model learns the map within tens of iterations, so the loss falls well below log(V)
// without any dataset on disk. Sample i is a pure function of (seed, split, i). GPT reads the
// walk as it is (with packed-document options, each jump is an end-of-document token); BERT gets
// it as two segments, masked as Megatron masks.
#pragma once

#include <cstdint>

#include "data/gpt_sample.hpp"

namespace megatron::train {

class MockGptSource final : public data::SampleSource {
 public:
  // split: 0 train, 1 validation, 2 test (different walks for each).
  // documents: the data.reset_* / eod_mask_loss switches; when any is on, the token at each
  // jump is documents.eod_token, so that the walk is a run of short documents.
  MockGptSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split, int64_t size,
                data::GptSampleOptions documents = {});
  int64_t size() const override { return size_; }
  data::Sample sample(int64_t i) const override;

 private:
  int64_t seq_length_, vocab_size_;
  uint64_t seed_;
  int split_;
  int64_t size_;
  uint64_t multiplier_ = 1, offset_ = 0;
  data::GptSampleOptions documents_;
};

// BERT-shaped: [CLS] A [SEP] B [SEP] and padding, A and B consecutive stretches of one walk
// over ids 4..V-1 (ids 0-3 are [PAD], [CLS], [SEP], [MASK]); one sample in ten shorter than S
// (padded, with its padding mask); with the binary head the segments are swapped half the time
// (the sentence-order target); 15% of the segment tokens are scored, of which 80% read [MASK],
// 10% a random id and 10% themselves.
class MockBertSource final : public data::SampleSource {
 public:
  static constexpr int32_t kPad = 0, kCls = 1, kSep = 2, kMask = 3, kFirstWord = 4;
  MockBertSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split, int64_t size,
                 bool binary_head);
  int64_t size() const override { return size_; }
  data::Sample sample(int64_t i) const override;

 private:
  int64_t seq_length_, words_;  // words_: ids kFirstWord .. vocab_size - 1
  uint64_t seed_;
  int split_;
  int64_t size_;
  bool binary_head_;
  uint64_t multiplier_ = 1, offset_ = 0;
};

// Synthetic T5 samples, a pure function of (seed, split, i): the same kind of walk over word ids
// 3..V-n-1 (0 [PAD], 1 [BOS], 2 [EOS]; the last n ids are the sentinels), one sample in ten
// shorter than the encoder; spans of 1 to 5 tokens start at about one token in twenty (about 15%
// masked, as T5's rate) while sentinels and decoder positions last, and become T5's layout:
// each span a sentinel in the encoder, decoder input [BOS] (sentinel, span)..., labels
// (sentinel, span)... [EOS].
class MockT5Source final : public data::SampleSource {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2, kFirstWord = 3;
  MockT5Source(int64_t encoder_length, int64_t decoder_length, int64_t vocab_size,
               int64_t sentinels, uint64_t seed, int split, int64_t size);
  int64_t size() const override { return size_; }
  data::Sample sample(int64_t i) const override;

 private:
  int64_t encoder_length_, decoder_length_, vocab_size_, sentinels_, words_;
  uint64_t seed_;
  int split_;
  int64_t size_;
  uint64_t multiplier_ = 1, offset_ = 0;
};

}  // namespace megatron::train
