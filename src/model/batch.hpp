// One micro-batch on the device: the one input type of every model family. GPT fills the token
// fields; BERT adds token types, a padding mask and the sentence-order targets; T5 adds the
// decoder's inputs (its labels and loss mask are the decoder's).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace megatron::model {

// Tokens are ordered batch-major (row b * seq + t). The sequence length is the batch's own:
// models read it from here, not from the recipe.
struct Batch {
  int64_t batch = 0;
  int64_t seq = 0;
  tensor::Tensor tokens;     // i32 [batch * seq]
  tensor::Tensor labels;     // i32 [batch * seq], each inside the vocabulary (0 where unmasked)
  tensor::Tensor loss_mask;  // f32 [batch * seq]
  tensor::Tensor positions;  // i32 [batch * seq]
  tensor::Tensor token_types;  // i32 [batch * seq] segment ids; undefined without token types
  // The padding mask: sequence b attends to its keys 0..key_lengths[b]-1 only. Empty: every key.
  std::vector<int64_t> key_lengths;
  // Documents packed into a sequence (GPT with data.reset_attention_mask): for each row b * seq +
  // t, the first position of its document, which is the first key it attends to. Empty: one
  // document a sequence.
  std::vector<int64_t> first_keys;
  // The binary head's target per sequence (BERT: 1 when the segments were swapped, else 0;
  // -1: none). Empty without a binary head.
  std::vector<int32_t> sentence_order;
  // Classification on the last token (GPT): each sequence's tokens before its padding. Empty:
  // every sequence is full. sentence_order then holds each sequence's class.
  std::vector<int64_t> valid_lengths;
  // T5: the decoder's inputs and positions, i32 [batch * decoder_seq]; labels and loss_mask
  // then have that shape too. tokens, positions and key_lengths are the encoder's.
  int64_t decoder_seq = 0;
  tensor::Tensor decoder_tokens;
  tensor::Tensor decoder_positions;

  // T5's relative positions: the score bias of every self-attention over this batch's
  // sequence, f32 [seq * seq, this rank's heads], and the f32 tensor of that shape its gradient
  // accumulates into (shared storage: every block adds to the same one). Undefined: none.
  tensor::Tensor score_bias;
  tensor::Tensor score_bias_grad;

  int64_t rows() const { return batch * seq; }
  // T5: the batch as each stack sees it (shape, tokens, positions, masks, targets).
  Batch encoder_view() const {
    return {.batch = batch, .seq = seq, .tokens = tokens, .positions = positions,
            .key_lengths = key_lengths};
  }
  Batch decoder_view() const {
    return {.batch = batch, .seq = decoder_seq, .tokens = decoder_tokens, .labels = labels,
            .loss_mask = loss_mask, .positions = decoder_positions};
  }
};

}  // namespace megatron::model
