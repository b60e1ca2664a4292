// One pre-norm transformer block: x + dropout(attn(norm(x))), then + dropout(mlp(norm(.))),
// with explicit forward and backward, the activations it keeps spelled out, and Megatron's
// tensor parallelism (heads and FFN split; sequence-parallel norms and dropout). Attention is
// causal or bidirectional with the batch's padding mask, as the config says.
#pragma once

#include <memory>
#include <string>

#include "model/batch.hpp"
#include "model/kv_cache.hpp"
#include "model/model_config.hpp"
#include "model/linear.hpp"
#include "model/norm.hpp"
#include "model/pass.hpp"

namespace megatron::model {

// What the block keeps for backward. Which members are set depends on `Keep`.
struct BlockActivations {
  tensor::Tensor input;  // always
  Norm::Saved norm1;
  tensor::Tensor ln1;  // the whole sequence (gathered under sequence parallelism)
  tensor::Tensor qkv;  // after rotary
  tensor::Tensor attn;  // attention core output; dropped under selective recompute
  tensor::Tensor lse;   // ditto
  tensor::Tensor mid;   // x + dropout(attention projection)
  Norm::Saved norm2;
  tensor::Tensor ln2;  // the whole sequence
  tensor::Tensor fc1;  // before the activation
  tensor::Tensor act;  // after it
};

enum class Keep {
  Nothing,        // evaluation: no backward follows
  Everything,     // no recompute
  AllButCore,     // selective recompute: the attention core is run again in backward
  InputOnly,      // full recompute: the whole block is run again in backward
};

class TransformerBlock {
 public:
  TransformerBlock(ParameterSet& params, const ModelConfig& config, int64_t layer);

  // x: this rank's rows of the hidden states ([batch * seq / tp, hidden] under sequence
  // parallelism, else all of them) of `batch`, which gives the shape and the padding mask.
  tensor::Tensor forward(const Pass& pass, const tensor::Tensor& x, const Batch& batch,
                         BlockActivations& saved, Keep keep) const;
  // Generation: the `seq` new tokens of each of `batch` sequences (x [batch * seq, hidden], no
  // sequence parallelism), at positions start.. after the cache's first `start`; their keys and
  // values join the cache. No dropout, nothing kept.
  tensor::Tensor forward_cached(tensor::Backend& backend, const tensor::Tensor& x, int64_t batch,
                                int64_t seq, int64_t start, LayerCache& cache) const;
  // An empty cache for `batch` sequences of up to `capacity` positions.
  LayerCache make_cache(tensor::Backend& backend, int64_t batch, int64_t capacity) const;
  // Consumes `saved`; returns dx.
  tensor::Tensor backward(const Pass& pass, const tensor::Tensor& dy, const Batch& batch,
                          BlockActivations& saved) const;

 private:
  tensor::AttentionShape attention_shape(const Batch& batch) const;
  tensor::AttentionOptions attention_options(const Pass& pass, const Batch& batch) const;
  // Dropout on this rank's rows of the hidden states draws what those rows draw in one process.
  tensor::RngKey hidden_key(const Pass& pass, DropoutSite site, const Batch& batch) const;

  const ModelConfig& config_;
  parallel::TensorParallel tp_;
  int64_t heads_, groups_, ffn_;  // this rank's
  int64_t layer_;
  Norm norm1_;
  Linear qkv_;
  Linear proj_;
  Norm norm2_;
  Linear fc1_;
  Linear fc2_;
};

}  // namespace megatron::model
