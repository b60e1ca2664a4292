// Sequence-to-sequence fine-tuning data for T5: source/target pairs read from jsonl (checked
// where they enter) and laid out as the span-corruption samples are (t5_dataset.hpp), the
// source in the encoder and the target in the decoder.
//
// Glossary: S the encoder's length, Sd the decoder's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sample.hpp"
#include "data/tokenizer.hpp"

namespace megatron::data {

struct Seq2SeqPair {
  std::string source;
  std::string target;
};

struct Seq2SeqFields {
  std::string source = "source";
  std::string target = "target";
};

// Each non-blank line an object with string fields `fields.source` and `fields.target`. A
// missing field, a value that is not a string, a line that is not an object or a file without
// pairs is a UserError naming file:line and the field.
std::vector<Seq2SeqPair> read_seq2seq_jsonl(const std::string& path,
                                            const Seq2SeqFields& fields = {});

// The tokenizer's ids for the decoder's start, the end of a sequence, and padding.
struct Seq2SeqTokens {
  int32_t bos = 0;
  int32_t eos = 0;
  int32_t pad = 0;
};

// One pair as a T5 sample:
//   tokens (S): the source's ids then [EOS], cut to S (the source's ids cut to S - 1, the final
//     [EOS] kept), padded with pad; valid_length the real ones; position_ids 0..S-1.
//   decoder_tokens (Sd): [BOS] then the target's ids, cut to Sd, padded with pad.
//   labels (Sd): the target's ids then [EOS], cut to Sd, padded with 0; loss_mask (Sd) 1 over
//     the real labels. (A target cut short loses its [EOS].)
// Throws UserError for a length below 1.
Sample seq2seq_sample(const Seq2SeqPair& pair, const Tokenizer& tokenizer,
                      const Seq2SeqTokens& tokens, int64_t encoder_length, int64_t decoder_length);

struct Seq2SeqStats {
  int64_t pairs = 0;
  int64_t cut_sources = 0;  // source ids + [EOS] longer than S
  int64_t cut_targets = 0;  // target ids + [EOS] longer than Sd
};

// The pairs as `size` samples, epoch after epoch: each epoch a permutation of the pairs drawn
// from (seed, epoch) when `shuffle` (ClassificationSource's draws), else the pairs in order.
// The pairs are tokenised once, here; sample(i) is a pure function of i.
class Seq2SeqSource : public SampleSource {
 public:
  // Throws UserError for no pairs or a length below 1.
  Seq2SeqSource(const std::vector<Seq2SeqPair>& pairs, const Tokenizer& tokenizer,
                Seq2SeqTokens tokens, int64_t encoder_length, int64_t decoder_length, uint64_t seed,
                int64_t size, bool shuffle);
  int64_t size() const override { return size_; }
  Sample sample(int64_t i) const override;

  // The index (into the pairs given) of the pair sample i holds.
  int64_t pair_of(int64_t i) const;
  const Seq2SeqStats& stats() const { return stats_; }

 private:
  std::vector<std::vector<int32_t>> sources_, targets_;  // the pairs' ids
  Seq2SeqTokens tokens_;
  int64_t encoder_length_ = 0;
  int64_t decoder_length_ = 0;
  int64_t size_ = 0;
  Seq2SeqStats stats_;
  std::vector<std::vector<int32_t>> order_;  // per epoch; empty without shuffling
};

}  // namespace megatron::data
