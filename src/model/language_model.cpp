#include "model/language_model.hpp"

#include <stdexcept>

namespace megatron::model {

using tensor::Tensor;

namespace {

ParameterSet parameter_set(tensor::Backend* backend, tensor::DType dtype,
                           const parallel::TensorParallel& tp) {
  if (backend) return ParameterSet(*backend, dtype, tp);
  return ParameterSet(ParameterSet::ShapesOnly{}, dtype, tp);
}

}  // namespace

LanguageModel::LanguageModel(tensor::Backend& backend, const ModelConfig& config,
                             ModelPlacement placement)
    : LanguageModel(&backend, config, std::move(placement)) {}

std::vector<Parameter> LanguageModel::describe(const ModelConfig& config) {
  const LanguageModel shapes(nullptr, config, {});
  std::vector<Parameter> out;
  for (const auto& p : shapes.parameters().all()) out.push_back(*p);
  return out;
}

LanguageModel::LanguageModel(tensor::Backend* backend, const ModelConfig& config,
                             ModelPlacement placement)
    : config_(config),
      placement_(std::move(placement)),
      tp_(placement_.tp),
      params_(parameter_set(backend, config.dtype, placement_.tp)) {
  if (placement_.chunks.empty()) {
    placement_.chunks.emplace_back();
    for (int64_t layer = 0; layer < config_.total_layers(); ++layer) placement_.chunks[0].push_back(layer);
  }
  if (config_.encoder_decoder && config_.position == PositionEmbedding::Relative &&
      (placement_.chunks.size() != 1 || !placement_.first_stage || !placement_.last_stage)) {
    throw std::invalid_argument("LanguageModel: relative positions run as one chunk");
  }
  const bool tied_copy = !placement_.first_stage && placement_.last_stage && config_.tie_embeddings;
  if (placement_.first_stage || tied_copy) {
    // The last stage's copy of a tied embedding has the same name, so the same initial values.
    word_embeddings_ = &params_.add("embedding.word_embeddings.weight",
                                    {config_.padded_vocab, config_.hidden}, Init::Normal,
                                    TpSplit::Rows, true);
    word_embeddings_->shared_copy = tied_copy;
    word_embeddings_->padded_vocab = true;
  }
  if (placement_.first_stage) {
    embedding_ = std::make_unique<Embedding>(params_, config_, *word_embeddings_);
  }
  if (config_.encoder_decoder && config_.position == PositionEmbedding::Relative) {
    // Megatron-Core's T5Model: one table per stack, shared by all its layers.
    encoder_bias_ = std::make_unique<RelativePositionBias>(
        params_, config_, "encoder_relative_pos_emb.relative_attention_bias.weight", true);
    decoder_bias_ = std::make_unique<RelativePositionBias>(
        params_, config_, "decoder_relative_pos_emb.relative_attention_bias.weight", false);
  }
  int64_t blocks_so_far = 0;
  for (const auto& layers : placement_.chunks) {
    chunk_first_block_.push_back(blocks_so_far);
    blocks_so_far += int64_t(layers.size());
    blocks_.emplace_back();
    block_first_param_.emplace_back();
    for (int64_t layer : layers) {
      block_first_param_.back().push_back(params_.all().size());
      const bool decoder = config_.is_decoder_layer(layer);
      const size_t first = params_.all().size();
      blocks_.back().push_back(std::make_unique<TransformerBlock>(params_, config_, layer,
                                                                  block_spec(config_, layer)));
      if (decoder) {
        for (size_t p = first; p < params_.all().size(); ++p) {
          params_.all()[p]->scaled_layers = config_.decoder_layers;
        }
      }
      if (config_.encoder_decoder && layer == config_.num_layers - 1) {
        encoder_norm_first_param_ = params_.all().size();
        encoder_norm_ = std::make_unique<Norm>(params_, "encoder.final_layernorm", config_.hidden,
                                               config_.norm, config_.norm_eps);
      }
    }
  }
  head_first_param_ = params_.all().size();
  if (placement_.last_stage) {
    final_norm_ = std::make_unique<Norm>(params_, "decoder.final_layernorm", config_.hidden,
                                         config_.norm, config_.norm_eps);
    // A classifier replaces the language-model head (and BERT's binary head).
    if (config_.classes == 0) {
      if (!config_.tie_embeddings) {
        output_ = &params_.add("output_layer.weight", {config_.padded_vocab, config_.hidden},
                               Init::Normal, TpSplit::Rows, true);
        output_->padded_vocab = true;
      }
      lm_head_ = std::make_unique<LmHead>(params_, config_, output_ ? *output_ : *word_embeddings_);
    }
    if (config_.binary_head || config_.classes > 0) {
      binary_head_ = std::make_unique<BinaryHead>(params_, config_);
    }
  }
}

Keep LanguageModel::keep_for(int64_t position) const {
  switch (config_.recompute) {
    case Recompute::None: return Keep::Everything;
    case Recompute::Selective: return Keep::AllButCore;
    case Recompute::Full:
      return position < config_.recompute_layers ? Keep::InputOnly : Keep::Everything;
  }
  return Keep::Everything;
}

int64_t LanguageModel::hidden_rows(const Batch& batch) const {
  // T5: the encoder side's rows, then the decoder side's.
  if (config_.encoder_decoder) {
    return tp_.local_rows(batch.rows()) + tp_.local_rows(batch.batch * batch.decoder_seq);
  }
  return tp_.local_rows(batch.rows());
}

// Between chunks a T5 micro-batch travels as one tensor: this rank's rows of the encoder side
// (its hidden states, or after the encoder's final norm the memory) and then of the decoder side
// (its embedded input, then its hidden states). The first chunk embeds both stacks' inputs, so
// only the first stage needs the embedding tables.
Tensor LanguageModel::forward_encoder_decoder(const Pass& pass, int64_t chunk, const Batch& batch,
                                              Tensor x, Activations* saved, Losses* losses,
                                              HeadOutputs* outputs) const {
  tensor::Backend& b = pass.backend;
  const bool keep = saved != nullptr;
  const auto& blocks = blocks_[size_t(chunk)];
  if (keep) saved->blocks.assign(blocks.size(), {});
  Batch encoder = batch.encoder_view(), decoder = batch.decoder_view();
  if (encoder_bias_) {
    for (auto [view, table] : {std::pair{&encoder, encoder_bias_.get()}, {&decoder, decoder_bias_.get()}}) {
      view->score_bias = table->forward(b, view->seq);
      if (keep) {
        view->score_bias_grad = b.empty(view->score_bias.shape(), tensor::DType::F32);
        b.fill(view->score_bias_grad, 0.0);
      }
    }
  }
  const int64_t enc_rows = tp_.local_rows(encoder.rows());
  Tensor enc, dec;
  if (starts_model(chunk)) {
    enc = embedding_->forward(pass, encoder);
    dec = embedding_->forward(pass, decoder, DropoutSite::DecoderEmbedding);
  } else {
    enc = x.slice(0, enc_rows);
    dec = x.slice(enc_rows, x.dim(0));
  }
  // The encoder side becomes the memory at the encoder's final norm (in this chunk or before).
  EncoderMemory memory{.seq = encoder.seq, .key_lengths = encoder.key_lengths};
  for (size_t i = 0; i < blocks.size(); ++i) {
    BlockActivations scratch;
    BlockActivations& slot = keep ? saved->blocks[i] : scratch;
    const Keep what = keep ? keep_for(chunk_first_block_[size_t(chunk)] + int64_t(i)) : Keep::Nothing;
    if (blocks[i]->spec().cross_attention) {
      if (!memory.states.defined()) memory.states = parallel::gather_sequence(b, tp_, enc);
      dec = blocks[i]->forward(pass, dec, decoder, slot, what, &memory);
      continue;
    }
    enc = blocks[i]->forward(pass, enc, encoder, slot, what);
    if (blocks[i]->layer() == config_.num_layers - 1) {
      Norm::Saved norm;
      Tensor normed = encoder_norm_->forward(b, enc, norm);
      if (keep) {
        saved->encoder_final_input = std::move(enc);
        saved->encoder_norm = std::move(norm);
      }
      enc = std::move(normed);
    }
  }
  Tensor out;
  if (ends_model(chunk)) {
    Norm::Saved norm;
    Tensor y = final_norm_->forward(b, dec, norm);
    lm_head_->forward(pass, decoder, y, keep ? &saved->lm : nullptr, *losses, outputs);
    if (keep) {
      saved->final_input = dec;
      saved->final_norm = std::move(norm);
    }
  } else {
    out = b.empty({enc.dim(0) + dec.dim(0), config_.hidden}, config_.dtype);
    Tensor to_enc = out.slice(0, enc.dim(0)), to_dec = out.slice(enc.dim(0), out.dim(0));
    b.copy(enc, to_enc);
    b.copy(dec, to_dec);
  }
  if (keep) {
    saved->memory = std::move(memory);
    saved->encoder_bias = encoder.score_bias;
    saved->encoder_bias_grad = encoder.score_bias_grad;
    saved->decoder_bias = decoder.score_bias;
    saved->decoder_bias_grad = decoder.score_bias_grad;
  }
  return out;
}

Tensor LanguageModel::backward_encoder_decoder(const Pass& pass, int64_t chunk, const Batch& batch,
                                               Tensor dy, Activations& saved, LossGrads grads) const {
  tensor::Backend& b = pass.backend;
  const auto& blocks = blocks_[size_t(chunk)];
  Batch encoder = batch.encoder_view(), decoder = batch.decoder_view();
  encoder.score_bias = saved.encoder_bias;
  encoder.score_bias_grad = saved.encoder_bias_grad;
  decoder.score_bias = saved.decoder_bias;
  decoder.score_bias_grad = saved.decoder_bias_grad;
  const int64_t enc_rows = tp_.local_rows(encoder.rows());
  Tensor denc, ddec;
  if (ends_model(chunk)) {
    ddec = lm_head_->backward(pass, decoder, saved.lm, grads.token);
    ddec = final_norm_->backward(b, ddec, saved.final_input, saved.final_norm);
    saved.final_input = {};
    pass.grads_ready(head_first_param_);
  } else {
    // Views of the received gradient: this chunk owns it, and the memory's share is added in place.
    denc = dy.slice(0, enc_rows);
    ddec = dy.slice(enc_rows, dy.dim(0));
  }
  // The decoder blocks add their cross-attention's share to the memory's gradient (every row,
  // partial over tensor-parallel ranks), reduced once to this rank's rows.
  Tensor dmemory;
  if (saved.memory.states.defined()) {
    dmemory = b.empty(saved.memory.states.shape(), saved.memory.states.dtype());
    b.fill(dmemory, 0.0);
  }
  const auto add_memory_grads = [&] {
    if (!dmemory.defined()) return;
    Tensor mine = parallel::reduce_partial(b, tp_, dmemory);
    if (denc.defined()) {
      b.add(denc, mine, denc);
    } else {
      denc = std::move(mine);
    }
    dmemory = {};
    saved.memory = {};
  };
  for (size_t i = blocks.size(); i-- > 0;) {
    if (blocks[i]->spec().cross_attention) {
      ddec = blocks[i]->backward(pass, ddec, decoder, saved.blocks[i], &saved.memory, &dmemory);
      pass.grads_ready(block_first_param_[size_t(chunk)][i]);
      continue;
    }
    add_memory_grads();  // this chunk's decoder blocks are done
    if (blocks[i]->layer() == config_.num_layers - 1) {
      denc = encoder_norm_->backward(b, denc, saved.encoder_final_input, saved.encoder_norm);
      saved.encoder_final_input = {};
      pass.grads_ready(encoder_norm_first_param_);
    }
    denc = blocks[i]->backward(pass, denc, encoder, saved.blocks[i]);
    pass.grads_ready(block_first_param_[size_t(chunk)][i]);
  }
  add_memory_grads();
  if (!starts_model(chunk)) {
    saved = {};
    Tensor dx = b.empty({denc.dim(0) + ddec.dim(0), config_.hidden}, config_.dtype);
    Tensor to_enc = dx.slice(0, denc.dim(0)), to_dec = dx.slice(denc.dim(0), dx.dim(0));
    b.copy(denc, to_enc);
    b.copy(ddec, to_dec);
    return dx;
  }
  if (decoder_bias_) decoder_bias_->backward(b, decoder.seq, decoder.score_bias_grad);
  if (encoder_bias_) encoder_bias_->backward(b, encoder.seq, encoder.score_bias_grad);
  saved = {};
  embedding_->backward(pass, decoder, std::move(ddec), DropoutSite::DecoderEmbedding);
  embedding_->backward(pass, encoder, std::move(denc));
  pass.grads_ready(0);
  return {};
}

Tensor LanguageModel::forward_chunk(const Pass& pass, int64_t chunk, const Batch& batch, Tensor x,
                                    Activations* saved, Losses* losses,
                                    HeadOutputs* outputs) const {
  if (config_.encoder_decoder) {
    return forward_encoder_decoder(pass, chunk, batch, std::move(x), saved, losses, outputs);
  }
  const bool keep = saved != nullptr;
  if (starts_model(chunk)) x = embedding_->forward(pass, batch);
  const auto& blocks = blocks_[size_t(chunk)];
  if (keep) saved->blocks.assign(blocks.size(), {});
  for (size_t i = 0; i < blocks.size(); ++i) {
    BlockActivations scratch;
    BlockActivations& slot = keep ? saved->blocks[i] : scratch;
    x = blocks[i]->forward(pass, x, batch, slot,
                           keep ? keep_for(chunk_first_block_[size_t(chunk)] + int64_t(i))
                                : Keep::Nothing);
  }
  if (!ends_model(chunk)) return x;
  Norm::Saved norm;
  Tensor y = final_norm_->forward(pass.backend, x, norm);
  if (lm_head_) lm_head_->forward(pass, batch, y, keep ? &saved->lm : nullptr, *losses, outputs);
  if (binary_head_) {
    binary_head_->forward(pass, batch, y, keep ? &saved->binary : nullptr, *losses, outputs);
  }
  if (keep) {
    saved->final_input = std::move(x);
    saved->final_norm = std::move(norm);
  }
  return {};
}

Tensor LanguageModel::backward_chunk(const Pass& pass, int64_t chunk, const Batch& batch, Tensor dy,
                                     Activations& saved, LossGrads grads) const {
  if (config_.encoder_decoder) {
    return backward_encoder_decoder(pass, chunk, batch, std::move(dy), saved, grads);
  }
  Tensor dx = std::move(dy);
  if (ends_model(chunk)) {
    Tensor dy_final;
    if (lm_head_) {
      dy_final = lm_head_->backward(pass, batch, saved.lm, grads.token);
    } else {
      dy_final = pass.backend.empty(saved.final_input.shape(), saved.final_input.dtype());
      pass.backend.fill(dy_final, 0.0);
    }
    if (binary_head_) binary_head_->backward(pass, batch, saved.binary, grads.sentence, dy_final);
    dx = final_norm_->backward(pass.backend, dy_final, saved.final_input, saved.final_norm);
    saved.final_input = {};
    pass.grads_ready(head_first_param_);
  }
  const auto& blocks = blocks_[size_t(chunk)];
  for (size_t i = blocks.size(); i-- > 0;) {
    dx = blocks[i]->backward(pass, dx, batch, saved.blocks[i]);
    pass.grads_ready(block_first_param_[size_t(chunk)][i]);
  }
  saved = {};
  if (!starts_model(chunk)) return dx;
  embedding_->backward(pass, batch, std::move(dx));
  pass.grads_ready(0);
  return {};
}

Losses LanguageModel::forward(const Pass& pass, const Batch& batch, Activations* saved,
                              HeadOutputs* outputs) const {
  Losses losses;
  forward_chunk(pass, 0, batch, {}, saved, &losses, outputs);
  return losses;
}

void LanguageModel::backward(const Pass& pass, const Batch& batch, Activations& saved,
                             LossGrads grads) const {
  backward_chunk(pass, 0, batch, {}, saved, grads);
}

KvCache LanguageModel::make_cache(tensor::Backend& b, int64_t batch, int64_t capacity) const {
  if (!embedding_ || !lm_head_ || blocks_.size() != 1 || !config_.causal || config_.encoder_decoder) {
    throw std::logic_error("generation needs a whole causal language model on each rank");
  }
  KvCache cache{.batch = batch, .capacity = capacity, .layers = {}};
  for (const auto& block : blocks_[0]) {
    cache.layers.push_back(block->make_cache(b, batch, capacity));
  }
  return cache;
}

std::vector<float> LanguageModel::decode(tensor::Backend& b, const std::vector<int32_t>& tokens,
                                         int64_t seq, int64_t start, KvCache& cache,
                                         const std::vector<int32_t>& logit_rows,
                                         int64_t vocab) const {
  std::vector<float> out(logit_rows.size() * size_t(vocab));
  decode_by_chunk(b, tokens, seq, start, cache, logit_rows, vocab,
                  [&](int64_t first, std::span<const float> chunk) {
                    std::copy(chunk.begin(), chunk.end(), out.begin() + first * vocab);
                  });
  return out;
}

void LanguageModel::decode_by_chunk(tensor::Backend& b, const std::vector<int32_t>& tokens,
                                    int64_t seq, int64_t start, KvCache& cache,
                                    const std::vector<int32_t>& logit_rows, int64_t vocab,
                                    const LmHead::RowLogits& each, int64_t chunk_bytes) const {
  const int64_t rows = cache.batch * seq;
  if (int64_t(tokens.size()) != rows || start < 0 || start + seq > cache.capacity ||
      cache.layers.size() != blocks_[0].size()) {
    throw std::logic_error("decode: tokens or positions do not match the cache");
  }
  Batch batch{.batch = cache.batch, .seq = seq};
  batch.tokens = b.empty({rows}, tensor::DType::I32);
  b.write(batch.tokens, tokens.data());
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) positions[size_t(i)] = int32_t(start + i % seq);
  batch.positions = b.empty({rows}, tensor::DType::I32);
  b.write(batch.positions, positions.data());
  Tensor x = embedding_->forward({.backend = b, .training = false}, batch);
  for (size_t i = 0; i < blocks_[0].size(); ++i) {
    x = blocks_[0][i]->forward_cached(b, x, cache.batch, seq, start, cache.layers[i]);
  }
  Norm::Saved norm;
  const Tensor y = final_norm_->forward(b, x, norm);
  Tensor picked = b.empty({int64_t(logit_rows.size())}, tensor::DType::I32);
  b.write(picked, logit_rows.data());
  lm_head_->logits_by_chunk(b, y, picked, vocab, each, chunk_bytes);
}

KvCache LanguageModel::make_pool(tensor::Backend& b, int64_t blocks, int64_t block_size) const {
  return make_cache(b, blocks, block_size);
}

void LanguageModel::decode_paged(tensor::Backend& b, const std::vector<int32_t>& tokens,
                                 PagedRows& rows, KvCache& pool,
                                 const std::vector<int32_t>& logit_rows, int64_t vocab,
                                 const LmHead::RowLogits& each, int64_t chunk_bytes) const {
  const int64_t n = int64_t(tokens.size());
  if (int64_t(rows.positions.size()) != n || rows.max_blocks <= 0 ||
      int64_t(rows.block_tables.size()) != n * rows.max_blocks || pool.layers.size() != blocks_[0].size()) {
    throw std::logic_error("decode_paged: tokens, positions and block tables do not match");
  }
  for (int64_t r = 0; r < n; ++r) {
    const int32_t p = rows.positions[size_t(r)];
    if (p < 0 || p >= rows.max_blocks * pool.capacity) {
      throw std::logic_error("decode_paged: a position is past its block table");
    }
    for (int64_t i = 0; i <= p / pool.capacity; ++i) {
      const int32_t block = rows.block_tables[size_t(r * rows.max_blocks + i)];
      if (block < 0 || block >= pool.batch) throw std::logic_error("decode_paged: a block outside the pool");
    }
  }
  Batch batch{.batch = n, .seq = 1};
  batch.tokens = b.empty({n}, tensor::DType::I32);
  b.write(batch.tokens, tokens.data());
  batch.positions = b.empty({n}, tensor::DType::I32);
  b.write(batch.positions, rows.positions.data());
  rows.device_positions = batch.positions;
  rows.device_tables = b.empty({n, rows.max_blocks}, tensor::DType::I32);
  b.write(rows.device_tables, rows.block_tables.data());
  Tensor x = embedding_->forward({.backend = b, .training = false}, batch);
  for (size_t i = 0; i < blocks_[0].size(); ++i) {
    x = blocks_[0][i]->forward_paged(b, x, rows, pool.layers[i]);
  }
  Norm::Saved norm;
  const Tensor y = final_norm_->forward(b, x, norm);
  Tensor picked = b.empty({int64_t(logit_rows.size())}, tensor::DType::I32);
  b.write(picked, logit_rows.data());
  lm_head_->logits_by_chunk(b, y, picked, vocab, each, chunk_bytes);
}

}  // namespace megatron::model
