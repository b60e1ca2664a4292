// One GPT training sample made from S + 1 consecutive tokens: inputs, next-token labels, the
// loss mask and position ids, as Megatron-Core's GPTDataset returns them.
//
// Glossary: S sequence length. Every vector below has S entries, except document_starts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace megatron::data {

// The per-sample switches of Megatron's GPTDatasetConfig. All three look at the *input*
// tokens (tokens, not labels), as Megatron's _get_ltor_masks_and_position_ids does.
struct GptSampleOptions {
  int32_t eod_token = 0;              // the tokenizer's end-of-document id
  bool eod_mask_loss = false;         // loss_mask 0 where the input token is EOD
  bool reset_position_ids = false;    // positions restart at 0 after each EOD
  bool reset_attention_mask = false;  // tokens after an EOD do not see tokens up to it
};

struct GptSample {
  std::vector<int32_t> tokens;        // (S) inputs: tokens 0..S-1 of the window
  std::vector<int32_t> labels;        // (S) targets: tokens 1..S of the window
  std::vector<float> loss_mask;       // (S) 1, or 0 at EOD inputs under eod_mask_loss
  std::vector<int32_t> position_ids;  // (S) 0..S-1, or restarting after each EOD
  // With reset_attention_mask: the first position of each document segment, ascending, always
  // starting with 0 (an EOD at position i starts a segment at i + 1 when i + 1 < S). Attention
  // is causal within a segment and blocked across segments: Megatron's block-diagonal mask,
  // kept as boundaries because there is no mask tensor here. Empty without the option, which
  // means plain causal attention over all S positions.
  std::vector<int32_t> document_starts;
};

// window: (S + 1) tokens; the sample's S is window.size() - 1.
GptSample make_gpt_sample(std::span<const int32_t> window, const GptSampleOptions& options);

// Anything that serves GPT samples by index: one dataset or a blend of several. sample(i) is a
// pure function of i (no cursor), so resuming at consumed-samples i is exact.
class GptSampleSource {
 public:
  virtual ~GptSampleSource() = default;
  virtual int64_t size() const = 0;
  virtual GptSample sample(int64_t i) const = 0;  // 0 <= i < size()
};

}  // namespace megatron::data
