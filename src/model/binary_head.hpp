// A head on each sequence: BERT's binary head (the pooler, dense + tanh on the first token, and a
// 2-way sentence-order classifier) and the classifier of classification fine-tuning (C classes,
// after the pooler for BERT, on the last token for GPT), with the cross-entropy and its
// backward. Tiny next to the LM head, so the tanh and the loss run on the host.
#pragma once

#include <memory>
#include <vector>

#include "model/batch.hpp"
#include "model/linear.hpp"
#include "model/losses.hpp"
#include "model/model_config.hpp"
#include "model/pass.hpp"

namespace megatron::model {

struct BinaryHeadSaved {
  // The sequences whose first token is among this rank's rows (all of them unless sequence
  // parallel), and that token's row in x.
  std::vector<int64_t> sequences, rows;
  tensor::Tensor first;   // [n, hidden] those rows of x
  tensor::Tensor pooled;  // [n, hidden] tanh(pooler(first))
  std::vector<float> logits;  // [batch * classes], every sequence's
};

class BinaryHead {
 public:
  // config.classes > 0: the fine-tuning classifier; else BERT's binary head.
  BinaryHead(ParameterSet& params, const ModelConfig& config);
  // x: this rank's rows of the final norm's output.
  void forward(const Pass& pass, const Batch& batch, const tensor::Tensor& x,
               BinaryHeadSaved* saved, Losses& losses, HeadOutputs* outputs) const;
  // Adds the head's gradient of sum_b sentence_grad * loss_b into dx (this rank's rows);
  // consumes `saved`.
  void backward(const Pass& pass, const Batch& batch, BinaryHeadSaved& saved,
                float sentence_grad, tensor::Tensor& dx) const;

 private:
  parallel::TensorParallel tp_;
  int64_t classes_ = 2;
  bool last_token_ = false;        // pool each sequence's last token (GPT) rather than its first
  std::unique_ptr<Linear> pooler_;  // null: the classifier reads the token's hidden state
  Linear classifier_;
};

}  // namespace megatron::model
