// GPT: token (+ learned position) embeddings, pre-norm transformer blocks, a final norm and
// the output layer (tied to the word embeddings or not) with a fused cross-entropy loss.
#pragma once

#include <memory>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/norm.hpp"
#include "model/parameter.hpp"
#include "model/pass.hpp"
#include "model/transformer_block.hpp"

namespace megatron::model {

// One micro-batch on the device, tokens ordered batch-major (row b * seq + t).
struct GptBatch {
  int64_t batch = 0;
  int64_t seq = 0;
  tensor::Tensor tokens;     // i32 [batch * seq]
  tensor::Tensor labels;     // i32 [batch * seq]
  tensor::Tensor loss_mask;  // f32 [batch * seq]
  tensor::Tensor positions;  // i32 [batch * seq]
};

struct GptActivations {
  std::vector<BlockActivations> blocks;
  tensor::Tensor final_input;
  Norm::Saved final_norm;
  tensor::Tensor final_ln;
  tensor::Tensor logits;  // f32 [tokens, padded vocab]
  tensor::Tensor lse;
};

struct LossSum {
  double loss = 0.0;    // sum of loss_mask * per-token loss
  double tokens = 0.0;  // sum of loss_mask
};

class GptModel {
 public:
  GptModel(tensor::Backend& backend, const GptConfig& config);
  const GptConfig& config() const { return config_; }
  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  void initialise(uint64_t seed) { params_.initialise(seed, config_.init_std, config_.num_layers); }

  // With a null `saved` nothing is kept (evaluation); pass.training switches dropout on.
  LossSum forward(const Pass& pass, const GptBatch& batch, GptActivations* saved) const;
  // Accumulates every parameter's gradient of sum_i loss_grad * loss_mask_i * loss_i.
  void backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                float loss_grad) const;

 private:
  Keep keep_for(const Pass& pass, int64_t layer) const;

  GptConfig config_;
  ParameterSet params_;
  Parameter* word_embeddings_;
  Parameter* position_embeddings_ = nullptr;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::unique_ptr<Norm> final_norm_;
  Parameter* output_ = nullptr;  // untied output layer
};

}  // namespace megatron::model
