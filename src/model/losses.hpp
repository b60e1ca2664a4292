// What a model's heads report for one micro-batch: loss sums for training and evaluation, and on
// request each token's loss and the logits (what eval scores and generation samples from).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace megatron::model {

// Sums over one micro-batch; the means are lm / tokens and sop / sentences.
struct Losses {
  double lm = 0.0;         // sum of loss_mask * per-token loss
  double tokens = 0.0;     // sum of loss_mask
  double sop = 0.0;        // binary head: sum of the sequences' cross-entropy
  double sentences = 0.0;  // sequences with a binary target
  double correct = 0.0;    // of those, how many the head's argmax got right
};

// The gradient of the objective with respect to each summed term: a token's loss enters as
// token * loss_mask, a sequence's binary loss as sentence.
struct LossGrads {
  float token = 0.0f;
  float sentence = 0.0f;
};

// Asked-for outputs of the last chunk. The tensors are set only when their flag is.
struct HeadOutputs {
  bool want_token_losses = false;
  bool want_logits = false;
  tensor::Tensor token_losses;  // f32 [rows]: each token's cross-entropy, before the loss mask
  // f32 [rows, padded vocab / tp]: this rank's vocabulary shard, columns vocab_first onwards
  // (the whole padded vocabulary without tensor parallelism).
  tensor::Tensor logits;
  int64_t vocab_first = 0;
  std::vector<float> sentence_logits;  // binary head: [batch * 2]

  // Scoring (evaluation) instead of losses: only the rows named in score_rows (i32 [n]) get
  // logits, over the vocabulary's first score_vocab columns (model.vocab_size: padding columns
  // are left out), and label_logprobs (f32 [n]) is each such row's log-probability of its
  // label in score_labels (i32 [n]), over the whole vocabulary. logits (with want_logits) is
  // then [n, this shard's columns below score_vocab]. No losses are summed.
  tensor::Tensor score_rows, score_labels;
  int64_t score_vocab = 0;
  tensor::Tensor label_logprobs;
  bool scoring() const { return score_rows.numel() > 0; }
};

}  // namespace megatron::model
