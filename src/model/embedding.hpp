// The input side of every model: word embeddings (vocab-parallel), learned positions and token
// types when the model has them, and embedding dropout, with its backward.
#pragma once

#include "model/batch.hpp"
#include "model/model_config.hpp"
#include "model/parameter.hpp"
#include "model/pass.hpp"

namespace megatron::model {

class Embedding {
 public:
  // `word`: the word embedding, created by the model (the output layer may share it).
  Embedding(ParameterSet& params, const ModelConfig& config, Parameter& word);
  // This rank's rows of the embedded batch ([rows / tp, hidden] under sequence parallelism).
  // `site`: T5 embeds its decoder's input with the same tables and its own dropout stream.
  tensor::Tensor forward(const Pass& pass, const Batch& batch,
                         DropoutSite site = DropoutSite::Embedding) const;
  // Accumulates the embeddings' gradients from dx (this rank's rows; consumed).
  void backward(const Pass& pass, const Batch& batch, tensor::Tensor dx,
                DropoutSite site = DropoutSite::Embedding) const;

 private:
  tensor::RngKey dropout_key(const Pass& pass, const Batch& batch, DropoutSite site) const;
  // Adds rows [first, first + x rows) of table[ids] to x, or accumulates into its gradient.
  void add_rows(tensor::Backend& b, const Parameter& table, const tensor::Tensor& ids,
                tensor::Tensor& x) const;

  const ModelConfig& config_;
  parallel::TensorParallel tp_;
  Parameter& word_;
  Parameter* positions_ = nullptr;
  Parameter* token_types_ = nullptr;
};

}  // namespace megatron::model
