#include "model/embedding.hpp"

#include <stdexcept>

namespace megatron::model {

using tensor::Tensor;

Embedding::Embedding(ParameterSet& params, const ModelConfig& config, Parameter& word)
    : config_(config), tp_(params.tp()), word_(word) {
  if (config.position == PositionEmbedding::Learned) {
    positions_ = &params.add("embedding.position_embeddings.weight",
                             {config.max_positions, config.hidden}, Init::Normal, TpSplit::None,
                             true);
  }
  if (config.token_types > 0) {
    token_types_ = &params.add("embedding.tokentype_embeddings.weight",
                               {config.token_types, config.hidden}, Init::Normal, TpSplit::None,
                               true);
  }
}

tensor::RngKey Embedding::dropout_key(const Pass& pass, const Batch& batch, DropoutSite site) const {
  tensor::RngKey key = pass.dropout_key(config_.total_layers(), site);
  key.offset = uint64_t(tp_.first_row(batch.rows()) * config_.hidden);
  return key;
}

void Embedding::add_rows(tensor::Backend& b, const Parameter& table, const Tensor& ids,
                         Tensor& x) const {
  const int64_t first = tp_.first_row(ids.numel());
  b.embedding_forward(ids.slice(first, first + x.dim(0)), table.value, x, 0, true);
}

Tensor Embedding::forward(const Pass& pass, const Batch& batch, DropoutSite site) const {
  tensor::Backend& b = pass.backend;
  if (token_types_ && !batch.token_types.defined()) {
    throw std::logic_error("a model with token types got a batch without them");
  }
  // Each rank looks up the rows of its vocabulary shard (zeros elsewhere); the sum over ranks
  // is the embedding.
  Tensor x = b.empty({batch.rows(), config_.hidden}, config_.dtype);
  b.embedding_forward(batch.tokens, word_.value, x, tp_.shard_begin(config_.padded_vocab));
  x = parallel::reduce_partial(b, tp_, x);
  if (positions_) add_rows(b, *positions_, batch.positions, x);
  if (token_types_) add_rows(b, *token_types_, batch.token_types, x);
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_forward(x, x, pass.dropout(config_.hidden_dropout), dropout_key(pass, batch, site));
  }
  return x;
}

void Embedding::backward(const Pass& pass, const Batch& batch, Tensor dx, DropoutSite site) const {
  tensor::Backend& b = pass.backend;
  if (pass.dropout(config_.hidden_dropout) > 0.0f) {
    b.dropout_backward(dx, dx, pass.dropout(config_.hidden_dropout), dropout_key(pass, batch, site));
  }
  const int64_t first = tp_.first_row(batch.rows());
  for (Parameter* table : {positions_, token_types_}) {
    if (!table) continue;
    const Tensor& ids = table == positions_ ? batch.positions : batch.token_types;
    b.embedding_backward(ids.slice(first, first + dx.dim(0)), dx, table->grad);
  }
  b.embedding_backward(batch.tokens, parallel::gather_sequence(b, tp_, dx), word_.grad,
                       tp_.shard_begin(config_.padded_vocab));
}

}  // namespace megatron::model
