#include "model/gpt_model.hpp"

#include <algorithm>
#include <cmath>

#include "tensor/host_io.hpp"

namespace megatron::model {

using tensor::DType;
using tensor::Tensor;

GptModel::GptModel(tensor::Backend& backend, const GptConfig& config, ModelPlacement placement)
    : config_(config),
      placement_(std::move(placement)),
      tp_(placement_.tp),
      params_(backend, config.dtype, placement_.tp) {
  if (placement_.chunks.empty()) {
    placement_.chunks.emplace_back();
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) placement_.chunks[0].push_back(layer);
  }
  const bool tied_copy = !placement_.first_stage && placement_.last_stage && config_.tie_embeddings;
  if (placement_.first_stage || tied_copy) {
    // The last stage's copy of a tied embedding has the same name, so the same initial values.
    word_embeddings_ = &params_.add("embedding.word_embeddings.weight",
                                    {config_.padded_vocab, config_.hidden}, Init::Normal,
                                    TpSplit::Rows, true);
    word_embeddings_->shared_copy = tied_copy;
  }
  if (placement_.first_stage && config_.position == recipe::PositionEmbedding::Learned) {
    position_embeddings_ = &params_.add("embedding.position_embeddings.weight",
                                        {config_.max_positions, config_.hidden}, Init::Normal,
                                        TpSplit::None, true);
  }
  int64_t blocks_so_far = 0;
  for (const auto& layers : placement_.chunks) {
    chunk_first_block_.push_back(blocks_so_far);
    blocks_so_far += int64_t(layers.size());
    blocks_.emplace_back();
    block_first_param_.emplace_back();
    for (int64_t layer : layers) {
      block_first_param_.back().push_back(params_.all().size());
      blocks_.back().push_back(std::make_unique<TransformerBlock>(params_, config_, layer));
    }
  }
  head_first_param_ = params_.all().size();
  if (placement_.last_stage) {
    final_norm_ = std::make_unique<Norm>(params_, "decoder.final_layernorm", config_.hidden,
                                         config_.norm, config_.norm_eps);
    if (!config_.tie_embeddings) {
      output_ = &params_.add("output_layer.weight", {config_.padded_vocab, config_.hidden},
                             Init::Normal, TpSplit::Rows, true);
    }
  }
}

Keep GptModel::keep_for(int64_t position) const {
  switch (config_.recompute) {
    case recipe::Recompute::None: return Keep::Everything;
    case recipe::Recompute::Selective: return Keep::AllButCore;
    case recipe::Recompute::Full:
      return position < config_.recompute_layers ? Keep::InputOnly : Keep::Everything;
  }
  return Keep::Everything;
}

int64_t GptModel::hidden_rows(const GptBatch& batch) const {
  return tp_.local_rows(batch.batch * batch.seq);
}

tensor::RngKey GptModel::embedding_key(const Pass& pass, const GptBatch& batch) const {
  tensor::RngKey key = pass.dropout_key(config_.num_layers, DropoutSite::Embedding);
  key.offset = uint64_t(tp_.first_row(batch.batch * batch.seq) * config_.hidden);
  return key;
}

Tensor GptModel::embed(const Pass& pass, const GptBatch& batch) const {
  tensor::Backend& b = pass.backend;
  const int64_t tokens = batch.batch * batch.seq;
  // Each rank looks up the rows of its vocabulary shard (zeros elsewhere); the sum over ranks
  // is the embedding.
  Tensor x = b.empty({tokens, config_.hidden}, config_.dtype);
  b.embedding_forward(batch.tokens, word_embeddings_->value, x,
                      tp_.shard_begin(config_.padded_vocab));
  x = parallel::reduce_partial(b, tp_, x);
  if (position_embeddings_) {
    const int64_t first = tp_.first_row(tokens);
    b.embedding_forward(batch.positions.slice(first, first + x.dim(0)),
                        position_embeddings_->value, x, 0, true);
  }
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_forward(x, x, pass.dropout(config_.hidden_dropout), embedding_key(pass, batch));
  }
  return x;
}

void GptModel::embed_backward(const Pass& pass, const GptBatch& batch, Tensor dx) const {
  tensor::Backend& b = pass.backend;
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_backward(dx, dx, pass.dropout(config_.hidden_dropout), embedding_key(pass, batch));
  }
  if (position_embeddings_) {
    const int64_t first = tp_.first_row(batch.batch * batch.seq);
    b.embedding_backward(batch.positions.slice(first, first + dx.dim(0)), dx,
                         position_embeddings_->grad);
  }
  b.embedding_backward(batch.tokens, parallel::gather_sequence(b, tp_, dx),
                       word_embeddings_->grad, tp_.shard_begin(config_.padded_vocab));
}

void GptModel::combine_vocab_shards(tensor::Backend& b, Tensor& loss, Tensor& lse) const {
  // Shard r gives lse_r over its columns and loss_r = lse_r - (target logit if it holds the
  // target, else 0). The whole row's lse is logsumexp_r(lse_r); its target logit the sum over r
  // of lse_r - loss_r. Both are [tokens] vectors: small next to the logits.
  const int64_t n = loss.numel();
  Tensor all_lse = b.empty({tp_.size * n}, DType::F32);
  tp_.group->all_gather(lse, all_lse);
  Tensor target = b.empty({n}, DType::F32);
  std::vector<float> mine_lse = tensor::to_floats(b, lse), mine_loss = tensor::to_floats(b, loss);
  std::vector<float> target_logit(static_cast<size_t>(n));
  for (size_t i = 0; i < target_logit.size(); ++i) target_logit[i] = mine_lse[i] - mine_loss[i];
  tensor::write_floats(b, target, target_logit);
  tp_.group->all_reduce(target);
  const std::vector<float> lses = tensor::to_floats(b, all_lse), targets = tensor::to_floats(b, target);
  std::vector<float> whole_lse(static_cast<size_t>(n)), whole_loss(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float max = lses[size_t(i)];
    for (int64_t r = 1; r < tp_.size; ++r) max = std::max(max, lses[size_t(r * n + i)]);
    double sum = 0.0;
    for (int64_t r = 0; r < tp_.size; ++r) sum += std::exp(double(lses[size_t(r * n + i)] - max));
    whole_lse[size_t(i)] = max + float(std::log(sum));
    whole_loss[size_t(i)] = whole_lse[size_t(i)] - targets[size_t(i)];
  }
  tensor::write_floats(b, lse, whole_lse);
  tensor::write_floats(b, loss, whole_loss);
}

LossSum GptModel::head(const Pass& pass, const GptBatch& batch, Tensor x,
                       GptActivations* saved) const {
  tensor::Backend& b = pass.backend;
  const int64_t tokens = batch.batch * batch.seq;
  Norm::Saved final_norm;
  Tensor final_ln = parallel::gather_sequence(b, tp_, final_norm_->forward(b, x, final_norm));
  const Parameter& out = output_ ? *output_ : *word_embeddings_;
  Tensor logits = b.empty({tokens, out.value.dim(0)}, DType::F32);
  b.gemm(final_ln, false, out.value, true, logits);
  Tensor loss = b.empty({tokens}, DType::F32);
  Tensor lse = b.empty({tokens}, DType::F32);
  const tensor::VocabShard shard{.first = tp_.shard_begin(config_.padded_vocab),
                                          .partial = tp_.active()};
  b.cross_entropy_forward(logits, batch.labels, loss, lse, shard);
  if (tp_.active()) combine_vocab_shards(b, loss, lse);
  const LossSum result{.loss = b.dot(loss, batch.loss_mask), .tokens = b.sum(batch.loss_mask)};
  if (saved) {
    saved->final_input = std::move(x);
    saved->final_norm = std::move(final_norm);
    saved->final_ln = std::move(final_ln);
    saved->logits = std::move(logits);
    saved->lse = std::move(lse);
  }
  return result;
}

Tensor GptModel::head_backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                               float loss_grad) const {
  tensor::Backend& b = pass.backend;
  const int64_t tokens = batch.batch * batch.seq;
  Parameter& out = output_ ? *output_ : *word_embeddings_;
  const int64_t vocab = out.value.dim(0);  // this rank's shard
  Tensor dloss = b.empty({tokens}, DType::F32);
  b.copy(batch.loss_mask, dloss);
  b.scale(dloss, loss_grad);
  // The logits' gradient overwrites them in place: no second vocabulary-sized tensor.
  Tensor dlogits = saved.logits;
  saved.logits = {};
  const tensor::VocabShard shard{.first = tp_.shard_begin(config_.padded_vocab),
                                          .partial = tp_.active()};
  b.cross_entropy_backward(dlogits, batch.labels, saved.lse, dloss, dlogits, shard);
  saved.lse = {};
  Tensor dfinal_ln = b.empty({tokens, config_.hidden}, config_.dtype);
  if (config_.dtype == DType::F32) {
    b.gemm(dlogits, true, saved.final_ln, false, out.grad, 1.0f, 1.0f);
    b.gemm(dlogits, false, out.value, false, dfinal_ln);
  } else {
    // As Megatron, the gradient leaves the f32 loss in the model's dtype; it is narrowed a
    // block of rows at a time, so no second vocabulary-sized tensor ever exists.
    const int64_t rows = std::clamp<int64_t>((int64_t{1} << 22) / vocab, 1, tokens);
    Tensor narrow = b.empty({rows, vocab}, config_.dtype);
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
  dfinal_ln = parallel::reduce_partial(b, tp_, dfinal_ln);
  Tensor dx = final_norm_->backward(b, dfinal_ln, saved.final_input, saved.final_norm);
  saved.final_input = {};
  return dx;
}

Tensor GptModel::forward_chunk(const Pass& pass, int64_t chunk, const GptBatch& batch, Tensor x,
                               GptActivations* saved, LossSum* loss) const {
  const bool keep = saved != nullptr;
  if (starts_model(chunk)) x = embed(pass, batch);
  const auto& blocks = blocks_[size_t(chunk)];
  if (keep) saved->blocks.assign(blocks.size(), {});
  for (size_t i = 0; i < blocks.size(); ++i) {
    BlockActivations scratch;
    BlockActivations& slot = keep ? saved->blocks[i] : scratch;
    x = blocks[i]->forward(pass, x, batch.batch, slot,
                           keep ? keep_for(chunk_first_block_[size_t(chunk)] + int64_t(i))
                                : Keep::Nothing);
  }
  if (!ends_model(chunk)) return x;
  *loss = head(pass, batch, std::move(x), saved);
  return {};
}

Tensor GptModel::backward_chunk(const Pass& pass, int64_t chunk, const GptBatch& batch, Tensor dy,
                                GptActivations& saved, float loss_grad) const {
  Tensor dx = std::move(dy);
  if (ends_model(chunk)) {
    dx = head_backward(pass, batch, saved, loss_grad);
    pass.grads_ready(head_first_param_);
  }
  const auto& blocks = blocks_[size_t(chunk)];
  for (size_t i = blocks.size(); i-- > 0;) {
    dx = blocks[i]->backward(pass, dx, batch.batch, saved.blocks[i]);
    pass.grads_ready(block_first_param_[size_t(chunk)][i]);
  }
  saved = {};
  if (!starts_model(chunk)) return dx;
  embed_backward(pass, batch, std::move(dx));
  pass.grads_ready(0);
  return {};
}

LossSum GptModel::forward(const Pass& pass, const GptBatch& batch, GptActivations* saved) const {
  LossSum loss;
  forward_chunk(pass, 0, batch, {}, saved, &loss);
  return loss;
}

void GptModel::backward(const Pass& pass, const GptBatch& batch, GptActivations& saved,
                        float loss_grad) const {
  backward_chunk(pass, 0, batch, {}, saved, loss_grad);
}

}  // namespace megatron::model
