// One training sample of any family, as its dataset returns it, and the interface of anything
// that serves samples by index (one dataset, or a blend of several).
//
// Glossary: S sequence length (T5: the encoder's), Sd T5's decoder length. Every vector below
// has S entries, except document_starts and, for T5, the decoder's Sd (marked).
#pragma once

#include <cstdint>
#include <vector>

namespace megatron::data {

struct Sample {
  std::vector<int32_t> tokens;        // (S) inputs (T5: the encoder's)
  std::vector<int32_t> labels;        // (S; T5: Sd) targets, each a vocabulary id (0 where unscored)
  std::vector<float> loss_mask;       // (S; T5: Sd) 1 where the label is scored
  std::vector<int32_t> position_ids;  // (S)
  // GPT with reset_attention_mask: the first position of each document segment, ascending, always
  // starting with 0 (an EOD at position i starts a segment at i + 1 when i + 1 < S). Attention
  // is causal within a segment and blocked across segments: Megatron's block-diagonal mask,
  // kept as boundaries because there is no mask tensor here. Empty without the option, which
  // means plain causal attention over all S positions.
  std::vector<int32_t> document_starts;
  // BERT: (S) segment ids (0 for [CLS] A [SEP], 1 for B [SEP]); empty for GPT.
  std::vector<int32_t> token_types;
  // T5: (Sd) the decoder's inputs, [BOS] then each span's sentinel and tokens, padded with 0;
  // its positions are 0..Sd-1 and its self-attention is causal. Empty for other families.
  std::vector<int32_t> decoder_tokens;
  // BERT and T5 (the encoder): tokens before the padding (keys at or after it are masked out); 0: no padding mask.
  int32_t valid_length = 0;
  // BERT's sentence-order target: 1 when the two segments were swapped, 0 when in order; -1
  // for none.
  int32_t sentence_order = -1;
};

// sample(i) is a pure function of i (no cursor), so resuming at consumed-samples i is exact.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  virtual Sample sample(int64_t i) const = 0;  // 0 <= i < size()
};

}  // namespace megatron::data
