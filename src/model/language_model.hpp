// Every model family the engine trains, as one implementation assembled from the config: the
// embedding, pre-norm transformer blocks (causal or bidirectional with a padding mask), a final
// norm, the LM head and, for BERT, the binary head. One LanguageModel is one rank's part of the
// model: its tensor-parallel shard of its pipeline chunks.
#pragma once

#include <memory>
#include <vector>

#include "model/batch.hpp"
#include "model/binary_head.hpp"
#include "model/embedding.hpp"
#include "model/kv_cache.hpp"
#include "model/lm_head.hpp"
#include "model/losses.hpp"
#include "model/model_config.hpp"
#include "model/norm.hpp"
#include "model/parameter.hpp"
#include "model/relative_position.hpp"
#include "model/pass.hpp"
#include "model/transformer_block.hpp"

namespace megatron::model {

// What one chunk keeps for its backward.
struct Activations {
  std::vector<BlockActivations> blocks;
  // T5: the encoder's last hidden states (its final norm's input) and the memory the decoder
  // blocks attend to (the norm's output, every row).
  tensor::Tensor encoder_final_input;
  Norm::Saved encoder_norm;
  EncoderMemory memory;
  // T5 relative positions: each stack's score bias and its gradient.
  tensor::Tensor encoder_bias, encoder_bias_grad, decoder_bias, decoder_bias_grad;
  tensor::Tensor final_input;
  Norm::Saved final_norm;
  LmHeadSaved lm;
  BinaryHeadSaved binary;
};

// Which part of the model this rank holds.
struct ModelPlacement {
  parallel::TensorParallel tp;
  // Global layer indices of each model chunk this rank holds, in model order. Empty: one chunk
  // with every layer.
  std::vector<std::vector<int64_t>> chunks;
  bool first_stage = true;  // chunk 0 starts the model: embeddings
  bool last_stage = true;   // the last chunk ends it: final norm and heads
};

class LanguageModel {
 public:
  LanguageModel(tensor::Backend& backend, const ModelConfig& config, ModelPlacement placement = {});
  // Every parameter of the whole model of `config` (names, whole shapes, splits, padded_vocab)
  // in creation order, with no tensor allocated (value and grad empty): what a checkpoint's
  // shapes are checked against before a model of any size is built.
  static std::vector<Parameter> describe(const ModelConfig& config);
  // Its layers refer to config_: neither copied nor moved.
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;
  const ModelConfig& config() const { return config_; }
  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  void initialise(uint64_t seed) { params_.initialise(seed, config_.init_std, config_.num_layers); }
  int64_t chunks() const { return int64_t(blocks_.size()); }
  bool starts_model(int64_t chunk) const { return placement_.first_stage && chunk == 0; }
  bool ends_model(int64_t chunk) const { return placement_.last_stage && chunk == chunks() - 1; }
  // Rows of the hidden states passed between chunks: [rows, hidden] of the model's dtype (T5:
  // the encoder side's rows, then the decoder side's).
  int64_t hidden_rows(const Batch& batch) const;

  // One chunk. The model's first chunk embeds the batch (x unused); the others continue from x.
  // Returns the chunk's output, except for the model's last chunk, which returns an empty
  // tensor, adds the loss sums to `losses` and fills `outputs` as asked (may be null). With a
  // null `saved` nothing is kept (evaluation).
  tensor::Tensor forward_chunk(const Pass& pass, int64_t chunk, const Batch& batch,
                               tensor::Tensor x, Activations* saved, Losses* losses,
                               HeadOutputs* outputs = nullptr) const;
  // Consumes `saved`. dy is the gradient of the chunk's output (unused by the model's last
  // chunk, which starts from the objective `grads` weighs). Returns dx, empty for the model's
  // first chunk. A forward given pass.loss_grad_numerator (and a fused classifier) has already
  // applied the token loss's weight, grads.token: it must be that numerator over the tokens.
  tensor::Tensor backward_chunk(const Pass& pass, int64_t chunk, const Batch& batch,
                                tensor::Tensor dy, Activations& saved, LossGrads grads) const;

  // The whole model on one pipeline stage (a single chunk).
  Losses forward(const Pass& pass, const Batch& batch, Activations* saved,
                 HeadOutputs* outputs = nullptr) const;
  void backward(const Pass& pass, const Batch& batch, Activations& saved, LossGrads grads) const;

  // Generation (a whole causal language model on this rank's tensor-parallel shard: one
  // pipeline stage, no sequence parallelism). A cache for `batch` sequences of up to `capacity`
  // positions.
  KvCache make_cache(tensor::Backend& backend, int64_t batch, int64_t capacity) const;
  // Runs `tokens` (host, batch-major [batch * seq]) at positions start..start + seq - 1 after the
  // cache's first `start`, adding them to the cache; returns the logits (f32 [n, vocab], host,
  // the same on every tensor-parallel rank) of the rows `logit_rows` (indices b * seq + t) over
  // the first `vocab` columns.
  std::vector<float> decode(tensor::Backend& backend, const std::vector<int32_t>& tokens,
                            int64_t seq, int64_t start, KvCache& cache,
                            const std::vector<int32_t>& logit_rows, int64_t vocab) const;
  // The same, handing the logits to `each` a chunk of rows at a time (LmHead::logits_by_chunk):
  // what a prompt's log-probabilities need without its whole [rows, vocab] block.
  void decode_by_chunk(tensor::Backend& backend, const std::vector<int32_t>& tokens, int64_t seq,
                       int64_t start, KvCache& cache, const std::vector<int32_t>& logit_rows,
                       int64_t vocab, const LmHead::RowLogits& each,
                       int64_t chunk_bytes = LmHead::kLogitChunkBytes) const;
  // Continuous batching: a pool of `blocks` key/value blocks of `block_size` positions, and one
  // step over rows of many sequences, each at its own position (PagedRows), their keys and values
  // joining the pool; the logits of `logit_rows` go to `each` as decode_by_chunk's do.
  KvCache make_pool(tensor::Backend& backend, int64_t blocks, int64_t block_size) const;
  void decode_paged(tensor::Backend& backend, const std::vector<int32_t>& tokens, PagedRows& rows,
                    KvCache& pool, const std::vector<int32_t>& logit_rows, int64_t vocab,
                    const LmHead::RowLogits& each,
                    int64_t chunk_bytes = LmHead::kLogitChunkBytes) const;

 private:
  // backend null: a ShapesOnly parameter set (describe).
  LanguageModel(tensor::Backend* backend, const ModelConfig& config, ModelPlacement placement);
  // `position`: the block's place among this rank's blocks (the recompute count is per stage).
  Keep keep_for(int64_t position) const;
  // T5's chunks: encoder blocks, the encoder's final norm, decoder blocks over its output, heads;
  // what passes between chunks is hidden_rows' two sides.
  tensor::Tensor forward_encoder_decoder(const Pass& pass, int64_t chunk, const Batch& batch,
                                         tensor::Tensor x, Activations* saved, Losses* losses,
                                         HeadOutputs* outputs) const;
  tensor::Tensor backward_encoder_decoder(const Pass& pass, int64_t chunk, const Batch& batch,
                                          tensor::Tensor dy, Activations& saved,
                                          LossGrads grads) const;

  ModelConfig config_;
  ModelPlacement placement_;
  parallel::TensorParallel tp_;
  ParameterSet params_;
  Parameter* word_embeddings_ = nullptr;  // first stage, or the last stage's tied copy
  std::unique_ptr<Embedding> embedding_;  // first stage
  std::unique_ptr<RelativePositionBias> encoder_bias_, decoder_bias_;  // T5, relative positions
  std::vector<std::vector<std::unique_ptr<TransformerBlock>>> blocks_;  // per chunk
  std::vector<std::vector<size_t>> block_first_param_;  // index of each block's first parameter
  std::vector<int64_t> chunk_first_block_;              // blocks of this rank before each chunk
  size_t head_first_param_ = 0;
  std::unique_ptr<Norm> encoder_norm_;  // T5: after the encoder's last layer
  size_t encoder_norm_first_param_ = 0;
  std::unique_ptr<Norm> final_norm_;  // last stage
  Parameter* output_ = nullptr;       // untied output layer
  std::unique_ptr<LmHead> lm_head_;
  std::unique_ptr<BinaryHead> binary_head_;
};

}  // namespace megatron::model
