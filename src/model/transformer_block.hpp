// One pre-norm transformer block: x + dropout(attn(norm(x))), then + dropout(mlp(norm(.))),
// with explicit forward and backward and the activations it keeps spelled out.
#pragma once

#include <memory>
#include <string>

#include "model/gpt_config.hpp"
#include "model/linear.hpp"
#include "model/norm.hpp"
#include "model/pass.hpp"

namespace megatron::model {

// What the block keeps for backward. Which members are set depends on `Keep`.
struct BlockActivations {
  tensor::Tensor input;  // always
  Norm::Saved norm1;
  tensor::Tensor ln1;
  tensor::Tensor qkv;  // after rotary
  tensor::Tensor attn;  // attention core output; dropped under selective recompute
  tensor::Tensor lse;   // ditto
  tensor::Tensor mid;   // x + dropout(attention projection)
  Norm::Saved norm2;
  tensor::Tensor ln2;
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
  TransformerBlock(ParameterSet& params, const GptConfig& config, int64_t layer);

  tensor::Tensor forward(const Pass& pass, const tensor::Tensor& x, int64_t batch,
                         BlockActivations& saved, Keep keep) const;
  // Consumes `saved`; returns dx.
  tensor::Tensor backward(const Pass& pass, const tensor::Tensor& dy, int64_t batch,
                          BlockActivations& saved) const;

 private:
  tensor::AttentionShape attention_shape(int64_t batch) const;
  tensor::AttentionOptions attention_options(const Pass& pass) const;

  const GptConfig& config_;
  int64_t layer_;
  Norm norm1_;
  Linear qkv_;
  Linear proj_;
  Norm norm2_;
  Linear fc1_;
  Linear fc2_;
};

}  // namespace megatron::model
