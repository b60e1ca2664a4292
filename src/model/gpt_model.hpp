// GPT: token (+ learned position) embeddings, pre-norm transformer blocks, a final norm and
// the output layer (tied to the word embeddings or not) with a fused cross-entropy loss. One
// GptModel is one rank's part of the model: its tensor-parallel shard of its pipeline chunks.
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

// What one chunk keeps for its backward.
struct GptActivations {
  std::vector<BlockActivations> blocks;
  tensor::Tensor final_input;
  Norm::Saved final_norm;
  tensor::Tensor final_ln;  // the whole sequence
  tensor::Tensor logits;    // f32 [tokens, padded vocab / tp]
  tensor::Tensor lse;       // over the whole vocabulary
};

struct LossSum {
  double loss = 0.0;    // sum of loss_mask * per-token loss
  double tokens = 0.0;  // sum of loss_mask
};

// Which part of the model this rank holds.
struct ModelPlacement {
  parallel::TensorParallel tp;
  // Global layer indices of each model chunk this rank holds, in model order. Empty: one chunk
  // with every layer.
  std::vector<std::vector<int64_t>> chunks;
  bool first_stage = true;  // chunk 0 starts the model: embeddings
  bool last_stage = true;   // the last chunk ends it: final norm, output layer and loss
};

class GptModel {
 public:
  GptModel(tensor::Backend& backend, const GptConfig& config, ModelPlacement placement = {});
  const GptConfig& config() const { return config_; }
  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  void initialise(uint64_t seed) { params_.initialise(seed, config_.init_std, config_.num_layers); }
  int64_t chunks() const { return int64_t(blocks_.size()); }
  bool starts_model(int64_t chunk) const { return placement_.first_stage && chunk == 0; }
  bool ends_model(int64_t chunk) const { return placement_.last_stage && chunk == chunks() - 1; }
  // Rows of the hidden states passed between chunks: [rows, hidden] of the model's dtype.
  int64_t hidden_rows(const GptBatch& batch) const;

  // One chunk. The model's first chunk embeds batch.tokens (x unused); the others continue
  // from x. Returns the chunk's output, except for the model's last chunk, which returns an
  // empty tensor and writes the loss. With a null `saved` nothing is kept (evaluation).
  tensor::Tensor forward_chunk(const Pass& pass, int64_t chunk, const GptBatch& batch,
                               tensor::Tensor x, GptActivations* saved, LossSum* loss) const;
  // Consumes `saved`. dy is the gradient of the chunk's output (unused by the model's last
  // chunk, which starts from sum_i loss_grad * loss_mask_i * loss_i). Returns dx, empty for the
  // model's first chunk.
  tensor::Tensor backward_chunk(const Pass& pass, int64_t chunk, const GptBatch& batch,
                                tensor::Tensor dy, GptActivations& saved, float loss_grad) const;

  // The whole model on one pipeline stage (a single chunk).
  LossSum forward(const Pass& pass, const GptBatch& batch, GptActivations* saved) const;
  void backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                float loss_grad) const;

 private:
  // `position`: the block's place among this rank's blocks (the recompute count is per stage).
  Keep keep_for(int64_t position) const;
  tensor::Tensor embed(const Pass& pass, const GptBatch& batch) const;
  void embed_backward(const Pass& pass, const GptBatch& batch, tensor::Tensor dx) const;
  tensor::RngKey embedding_key(const Pass& pass, const GptBatch& batch) const;
  LossSum head(const Pass& pass, const GptBatch& batch, tensor::Tensor x,
               GptActivations* saved) const;
  tensor::Tensor head_backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                               float loss_grad) const;
  // The vocab-parallel loss: each rank's shard gives its log-sum-exp and target logit.
  void combine_vocab_shards(tensor::Backend& b, tensor::Tensor& loss, tensor::Tensor& lse) const;

  GptConfig config_;
  ModelPlacement placement_;
  parallel::TensorParallel tp_;
  ParameterSet params_;
  Parameter* word_embeddings_ = nullptr;  // first stage, or the last stage's tied copy
  Parameter* position_embeddings_ = nullptr;
  std::vector<std::vector<std::unique_ptr<TransformerBlock>>> blocks_;  // per chunk
  std::vector<std::vector<size_t>> block_first_param_;  // index of each block's first parameter
  std::vector<int64_t> chunk_first_block_;              // blocks of this rank before each chunk
  size_t head_first_param_ = 0;
  std::unique_ptr<Norm> final_norm_;
  Parameter* output_ = nullptr;  // untied output layer
};

}  // namespace megatron::model
