#include "model/gpt_model.hpp"

#include <algorithm>

namespace megatron::model {

using tensor::DType;
using tensor::Tensor;

GptModel::GptModel(tensor::Backend& backend, const GptConfig& config)
    : config_(config), params_(backend, config.dtype) {
  word_embeddings_ = &params_.add("embedding.word_embeddings.weight",
                                  {config_.padded_vocab, config_.hidden}, Init::Normal,
                                  TpSplit::Rows, true);
  if (config_.position == recipe::PositionEmbedding::Learned) {
    position_embeddings_ = &params_.add("embedding.position_embeddings.weight",
                                        {config_.max_positions, config_.hidden}, Init::Normal,
                                        TpSplit::None, true);
  }
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    blocks_.push_back(std::make_unique<TransformerBlock>(params_, config_, layer));
  }
  final_norm_ = std::make_unique<Norm>(params_, "decoder.final_layernorm", config_.hidden,
                                       config_.norm, config_.norm_eps);
  if (!config_.tie_embeddings) {
    output_ = &params_.add("output_layer.weight", {config_.padded_vocab, config_.hidden},
                           Init::Normal, TpSplit::Rows, true);
  }
}

Keep GptModel::keep_for(const Pass& pass, int64_t layer) const {
  switch (config_.recompute) {
    case recipe::Recompute::None: return Keep::Everything;
    case recipe::Recompute::Selective: return Keep::AllButCore;
    case recipe::Recompute::Full:
      return layer < config_.recompute_layers ? Keep::InputOnly : Keep::Everything;
  }
  return Keep::Everything;
}

LossSum GptModel::forward(const Pass& pass, const GptBatch& batch, GptActivations* saved) const {
  tensor::Backend& b = pass.backend;
  const int64_t tokens = batch.batch * batch.seq;
  const bool keep = saved != nullptr;

  Tensor x = b.empty({tokens, config_.hidden}, config_.dtype);
  b.embedding_forward(batch.tokens, word_embeddings_->value, x);
  if (position_embeddings_) {
    b.embedding_forward(batch.positions, position_embeddings_->value, x, 0, true);
  }
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_forward(x, x, pass.dropout(config_.hidden_dropout),
                      pass.dropout_key(config_.num_layers, DropoutSite::Embedding));
  }
  if (keep) saved->blocks.assign(blocks_.size(), {});
  for (size_t layer = 0; layer < blocks_.size(); ++layer) {
    BlockActivations scratch;
    BlockActivations& slot = keep ? saved->blocks[layer] : scratch;
    x = blocks_[layer]->forward(pass, x, batch.batch, slot,
                                keep ? keep_for(pass, int64_t(layer)) : Keep::Nothing);
  }

  Norm::Saved final_norm;
  Tensor final_ln = final_norm_->forward(b, x, final_norm);
  const Parameter& out = output_ ? *output_ : *word_embeddings_;
  Tensor logits = b.empty({tokens, config_.padded_vocab}, DType::F32);
  b.gemm(final_ln, false, out.value, true, logits);
  Tensor loss = b.empty({tokens}, DType::F32);
  Tensor lse = b.empty({tokens}, DType::F32);
  b.cross_entropy_forward(logits, batch.labels, loss, lse);
  const LossSum result{.loss = b.dot(loss, batch.loss_mask), .tokens = b.sum(batch.loss_mask)};

  if (keep) {
    saved->final_input = std::move(x);
    saved->final_norm = std::move(final_norm);
    saved->final_ln = std::move(final_ln);
    saved->logits = std::move(logits);
    saved->lse = std::move(lse);
  }
  return result;
}

void GptModel::backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                        float loss_grad) const {
  tensor::Backend& b = pass.backend;
  const int64_t tokens = batch.batch * batch.seq;
  Parameter& out = output_ ? *output_ : *word_embeddings_;

  Tensor dx;
  {
    Tensor dloss = b.empty({tokens}, DType::F32);
    b.copy(batch.loss_mask, dloss);
    b.scale(dloss, loss_grad);
    // The logits' gradient overwrites them in place: no second vocabulary-sized tensor.
    Tensor dlogits = saved.logits;
    saved.logits = {};
    b.cross_entropy_backward(dlogits, batch.labels, saved.lse, dloss, dlogits);
    saved.lse = {};
    Tensor dfinal_ln = b.empty({tokens, config_.hidden}, config_.dtype);
    if (config_.dtype == DType::F32) {
      b.gemm(dlogits, true, saved.final_ln, false, out.grad, 1.0f, 1.0f);
      b.gemm(dlogits, false, out.value, false, dfinal_ln);
    } else {
      // As Megatron, the gradient leaves the f32 loss in the model's dtype; it is narrowed a
      // block of rows at a time, so no second vocabulary-sized tensor ever exists.
      const int64_t rows = std::clamp<int64_t>((int64_t{1} << 22) / config_.padded_vocab, 1, tokens);
      Tensor narrow = b.empty({rows, config_.padded_vocab}, config_.dtype);
      for (int64_t first = 0; first < tokens; first += rows) {
        const int64_t last = std::min(tokens, first + rows);
        Tensor block = narrow.slice(0, last - first);
        b.copy(dlogits.slice(first, last), block);
        b.gemm(block, true, saved.final_ln.slice(first, last), false, out.grad, 1.0f, 1.0f);
        Tensor dx = dfinal_ln.slice(first, last);
        b.gemm(block, false, out.value, false, dx);
      }
    }
    dlogits = {};
    saved.final_ln = {};
    dx = final_norm_->backward(b, dfinal_ln, saved.final_input, saved.final_norm);
    saved.final_input = {};
  }
  for (size_t layer = blocks_.size(); layer-- > 0;) {
    dx = blocks_[layer]->backward(pass, dx, batch.batch, saved.blocks[layer]);
  }
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_backward(dx, dx, pass.dropout(config_.hidden_dropout),
                       pass.dropout_key(config_.num_layers, DropoutSite::Embedding));
  }
  b.embedding_backward(batch.tokens, dx, word_embeddings_->grad);
  if (position_embeddings_) b.embedding_backward(batch.positions, dx, position_embeddings_->grad);
  saved = {};
}

}  // namespace megatron::model
