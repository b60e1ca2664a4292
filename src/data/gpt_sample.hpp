// One GPT training sample made from S + 1 consecutive tokens: inputs, next-token labels, the
// loss mask and position ids, as Megatron-Core's GPTDataset returns them.
//
// Glossary: S sequence length. Every vector below has S entries, except document_starts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/sample.hpp"

namespace megatron::data {

// The per-sample switches of Megatron's GPTDatasetConfig. All three look at the *input*
// tokens (tokens, not labels), as Megatron's _get_ltor_masks_and_position_ids does.
struct GptSampleOptions {
  int32_t eod_token = 0;              // the tokenizer's end-of-document id
  bool eod_mask_loss = false;         // loss_mask 0 where the input token is EOD
  bool reset_position_ids = false;    // positions restart at 0 after each EOD
  bool reset_attention_mask = false;  // tokens after an EOD do not see tokens up to it
};

// window: (S + 1) tokens; the sample's S is window.size() - 1.
Sample make_gpt_sample(std::span<const int32_t> window, const GptSampleOptions& options);

}  // namespace megatron::data
