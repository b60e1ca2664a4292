// The language-model head: an optional transform (BERT: dense, GeLU, LayerNorm), the output layer
// (vocab-parallel, tied to the word embedding or its own), an optional vocab-parallel bias, and
// the cross-entropy over the whole vocabulary, with its backward.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/batch.hpp"
#include "model/linear.hpp"
#include "model/losses.hpp"
#include "model/model_config.hpp"
#include "model/norm.hpp"
#include "model/pass.hpp"

namespace megatron::model {

struct LmHeadSaved {
  tensor::Tensor input;  // transform only: this rank's rows of the head's input
  tensor::Tensor dense;  // transform: before GeLU
  tensor::Tensor act;    // transform: after GeLU
  Norm::Saved norm;
  tensor::Tensor features;  // the whole sequence's rows into the output layer
  tensor::Tensor logits;    // f32 [rows, padded vocab / tp]
  tensor::Tensor lse;       // over the whole vocabulary
  // Fused: no features, logits or lse; the gradient of features [rows, H] (model dtype, this
  // rank's vocabulary shard's part), computed during the forward.
  tensor::Tensor dfeatures;
};

class LmHead {
 public:
  // `output`: the output layer's weight [padded vocab, hidden] (the word embedding when tied).
  LmHead(ParameterSet& params, const ModelConfig& config, Parameter& output);
  // x: this rank's rows of the final norm's output. Adds the masked loss sums to `losses`; with a
  // null `saved` nothing is kept (evaluation). Fused (ModelConfig::fused_classifier, a `saved`,
  // pass.loss_grad_numerator set, no logits wanted): the output layer and cross-entropy run a
  // chunk of rows at a time, their gradients computed here, and the output layer's weight and
  // bias gradients accumulated now rather than in backward.
  void forward(const Pass& pass, const Batch& batch, const tensor::Tensor& x, LmHeadSaved* saved,
               Losses& losses, HeadOutputs* outputs) const;
  // Generation: the logits of `rows` (i32 [n] indices into x, this rank's final-norm output of
  // the whole batch) over the first `vocab` columns, f32 [n, vocab] on the host, every
  // tensor-parallel rank getting all of them (the shards are all-gathered).
  std::vector<float> logits(tensor::Backend& backend, const tensor::Tensor& x,
                            const tensor::Tensor& rows, int64_t vocab) const;
  // The same logits a chunk of rows at a time (at most kLogitChunkBytes of them each), handed to
  // `each` as (index of the chunk's first row in `rows`, f32 [chunk rows, vocab]) in order: a
  // caller that reduces each row (a log-probability) never holds the whole [n, vocab] block.
  using RowLogits = std::function<void(int64_t first, std::span<const float> logits)>;
  static constexpr int64_t kLogitChunkBytes = int64_t{64} << 20;
  void logits_by_chunk(tensor::Backend& backend, const tensor::Tensor& x,
                       const tensor::Tensor& rows, int64_t vocab, const RowLogits& each,
                       int64_t chunk_bytes = kLogitChunkBytes) const;
  // Starts from sum_i token_grad * loss_mask_i * loss_i; consumes `saved`; returns dx. After a
  // fused forward the loss's gradient is already in `saved` and `token_grad` is not read.
  tensor::Tensor backward(const Pass& pass, const Batch& batch, LmHeadSaved& saved,
                          float token_grad) const;

 private:
  // The vocab-parallel loss: each rank's shard gives its log-sum-exp and target logit.
  void combine_vocab_shards(tensor::Backend& b, tensor::Tensor& loss, tensor::Tensor& lse) const;
  // HeadOutputs' scoring: the chosen rows' logits and label log-probabilities.
  void score(tensor::Backend& b, const tensor::Tensor& features, HeadOutputs& outputs) const;
  // The fused forward's logits, loss and gradients, a chunk of rows at a time (see forward).
  void fused_forward(tensor::Backend& b, const Batch& batch, double loss_grad_numerator,
                     LmHeadSaved& s, Losses& losses, HeadOutputs* outputs) const;
  // dlogits [rows, vocab shard] f32 -> the output weight's and bias's gradients (accumulated)
  // and dfeatures [rows, H] (overwritten).
  void output_backward(tensor::Backend& b, const tensor::Tensor& dlogits,
                       const tensor::Tensor& features, tensor::Tensor dfeatures) const;

  const ModelConfig& config_;
  parallel::TensorParallel tp_;
  std::unique_ptr<Linear> dense_;
  std::unique_ptr<Norm> norm_;
  Parameter& output_;
  Parameter* bias_ = nullptr;
};

}  // namespace megatron::model
