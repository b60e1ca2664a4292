#include "model/lm_head.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/host_io.hpp"

namespace megatron::model {

using tensor::DType;
using tensor::Tensor;

namespace {
constexpr int64_t kScoreChunkElements = int64_t{8} << 20;  // 32 MiB of f32 logits
}  // namespace

LmHead::LmHead(ParameterSet& params, const ModelConfig& c, Parameter& output)
    : config_(c), tp_(params.tp()), output_(output) {
  if (c.lm_head_transform) {
    // A plain replicated layer on this rank's rows, as Megatron's BertLMHead.
    dense_ = std::make_unique<Linear>(params, "lm_head.dense", c.hidden, c.hidden, true,
                                      Init::Normal, TpSplit::None);
    norm_ = std::make_unique<Norm>(params, "lm_head.layer_norm", c.hidden, NormKind::LayerNorm,
                                   c.norm_eps);
  }
  if (c.output_bias) {
    bias_ = &params.add("output_layer.bias", {c.padded_vocab}, Init::Zeros, TpSplit::Rows, false);
    bias_->padded_vocab = true;
  }
}

void LmHead::combine_vocab_shards(tensor::Backend& b, Tensor& loss, Tensor& lse) const {
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

void LmHead::score(tensor::Backend& b, const Tensor& features, HeadOutputs& o) const {
  const int64_t n = o.score_rows.numel();
  const int64_t first = tp_.shard_begin(config_.padded_vocab);
  // Only the columns below score_vocab: a Hugging Face model has no padding columns, and a
  // padding column's logit (0) would take its share of the softmax.
  const int64_t columns = std::clamp<int64_t>(o.score_vocab - first, 0, output_.value.dim(0));
  if (columns == 0) {
    throw std::invalid_argument("a tensor-parallel rank holds no column of the scored vocabulary");
  }
  // Rows in chunks of at most kScoreChunkElements logits: a batch's whole [rows, vocabulary]
  // block would be hundreds of MiB (16 x 128 rows of GPT-2's 50,257: 411 MiB), touched once.
  const int64_t chunk = std::max<int64_t>(1, kScoreChunkElements / columns);
  Tensor block = b.empty({o.want_logits ? n : std::min(n, chunk), columns}, DType::F32);
  const Tensor weight = output_.value.slice(0, columns);
  Tensor bias;
  if (bias_) {
    bias = b.empty({columns}, DType::F32);
    b.copy(bias_->value.slice(0, columns), bias);
  }
  Tensor loss = b.empty({n}, DType::F32), lse = b.empty({n}, DType::F32);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    Tensor picked = b.empty({end - begin, features.dim(1)}, features.dtype());
    b.embedding_forward(o.score_rows.slice(begin, end), features, picked);  // a gather of rows
    Tensor logits = o.want_logits ? block.slice(begin, end) : block.slice(0, end - begin);
    b.gemm(picked, false, weight, true, logits);
    if (bias_) b.bias_add(logits, bias);
    Tensor chunk_loss = loss.slice(begin, end), chunk_lse = lse.slice(begin, end);
    b.cross_entropy_forward(logits, o.score_labels.slice(begin, end), chunk_loss, chunk_lse,
                            {.first = first, .partial = tp_.active()});
  }
  if (tp_.active()) combine_vocab_shards(b, loss, lse);
  b.scale(loss, -1.0f);
  o.label_logprobs = loss;
  if (o.want_logits) {
    o.logits = block;
    o.vocab_first = first;
  }
}

std::vector<float> LmHead::logits(tensor::Backend& b, const Tensor& x, const Tensor& rows,
                                  int64_t vocab) const {
  std::vector<float> out(size_t(rows.numel() * vocab));
  logits_by_chunk(b, x, rows, vocab, [&](int64_t first, std::span<const float> chunk) {
    std::copy(chunk.begin(), chunk.end(), out.begin() + first * vocab);
  });
  return out;
}

void LmHead::logits_by_chunk(tensor::Backend& b, const Tensor& x, const Tensor& rows,
                             int64_t vocab, const RowLogits& each, int64_t chunk_bytes) const {
  const int64_t n = rows.numel(), shard = output_.value.dim(0);
  // Rows per chunk from the widest block a chunk makes: the gathered shards, or the vocabulary.
  const int64_t width = std::max(tp_.size * shard, vocab);
  const int64_t chunk = std::clamp<int64_t>(chunk_bytes / (4 * width), 1, std::max<int64_t>(n, 1));
  Tensor bias;
  if (bias_) {
    bias = b.empty({shard}, DType::F32);
    b.copy(bias_->value, bias);
  }
  std::vector<float> out;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    Tensor features = b.empty({count, x.dim(1)}, x.dtype());
    b.embedding_forward(rows.slice(begin, begin + count), x, features);  // a gather of rows
    if (dense_) {
      Tensor dense = dense_->forward(b, features);
      Tensor act = b.empty(dense.shape(), dense.dtype());
      b.gelu_forward(dense, act, false);
      Norm::Saved saved;
      features = norm_->forward(b, act, saved);
    }
    Tensor mine = b.empty({count, shard}, DType::F32);
    b.gemm(features, false, output_.value, true, mine);
    if (bias_) b.bias_add(mine, bias);
    Tensor all = mine;
    if (tp_.active()) {
      all = b.empty({tp_.size * count * shard}, DType::F32);
      tp_.group->all_gather(mine, all);
    }
    const std::vector<float> gathered = tensor::to_floats(b, all);  // [tp][count][shard]
    out.assign(size_t(count * vocab), 0.0f);
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t r = 0; r < tp_.size; ++r) {
        const int64_t first = r * shard, columns = std::clamp<int64_t>(vocab - first, 0, shard);
        std::copy_n(gathered.begin() + (r * count + i) * shard, columns,
                    out.begin() + i * vocab + first);
      }
    }
    each(begin, out);
  }
}

void LmHead::forward(const Pass& pass, const Batch& batch, const Tensor& x, LmHeadSaved* saved,
                     Losses& losses, HeadOutputs* outputs) const {
  tensor::Backend& b = pass.backend;
  const int64_t rows = batch.rows();
  LmHeadSaved mine;
  LmHeadSaved& s = saved ? *saved : mine;
  if (dense_) {
    s.input = x;
    s.dense = dense_->forward(b, x);
    s.act = b.empty(s.dense.shape(), s.dense.dtype());
    b.gelu_forward(s.dense, s.act, false);
    s.features = parallel::gather_sequence(b, tp_, norm_->forward(b, s.act, s.norm));
  } else {
    s.features = parallel::gather_sequence(b, tp_, x);
  }
  if (outputs && outputs->scoring()) {
    score(b, s.features, *outputs);
    return;
  }
  // `saved` means a backward follows; the numerator makes the loss's gradient known now. Wanted
  // logits would have to be whole anyway.
  if (saved && config_.fused_classifier && pass.loss_grad_numerator &&
      !(outputs && outputs->want_logits)) {
    fused_forward(b, batch, *pass.loss_grad_numerator, s, losses, outputs);
    return;
  }
  s.logits = b.empty({rows, output_.value.dim(0)}, DType::F32);
  b.gemm(s.features, false, output_.value, true, s.logits);
  if (bias_) {
    Tensor bias = b.empty({bias_->value.numel()}, DType::F32);
    b.copy(bias_->value, bias);
    b.bias_add(s.logits, bias);
  }
  Tensor loss = b.empty({rows}, DType::F32);
  s.lse = b.empty({rows}, DType::F32);
  const tensor::VocabShard shard{.first = tp_.shard_begin(config_.padded_vocab),
                                 .partial = tp_.active()};
  b.cross_entropy_forward(s.logits, batch.labels, loss, s.lse, shard);
  if (tp_.active()) combine_vocab_shards(b, loss, s.lse);
  losses.lm += b.dot(loss, batch.loss_mask);
  losses.tokens += b.sum(batch.loss_mask);
  if (outputs && outputs->want_token_losses) outputs->token_losses = loss;
  if (outputs && outputs->want_logits) {
    outputs->vocab_first = shard.first;
    if (saved) {
      // Backward overwrites the saved logits with their gradient.
      outputs->logits = b.empty(s.logits.shape(), DType::F32);
      b.copy(s.logits, outputs->logits);
    } else {
      outputs->logits = s.logits;
    }
  }
}

void LmHead::fused_forward(tensor::Backend& b, const Batch& batch, double loss_grad_numerator,
                           LmHeadSaved& s, Losses& losses, HeadOutputs* outputs) const {
  const int64_t rows = batch.rows(), shard = output_.value.dim(0);
  // Each token's gradient needs the whole micro-batch's loss-mask sum, so it is taken first; the
  // division is the trainer's LossGrads::token (train/pipeline_step.cpp), to the bit.
  const double tokens = b.sum(batch.loss_mask);
  const float token_grad = float(loss_grad_numerator / std::max(tokens, 1.0));
  Tensor dloss = b.empty({rows}, DType::F32);
  b.copy(batch.loss_mask, dloss);
  b.scale(dloss, token_grad);
  Tensor loss = b.empty({rows}, DType::F32), lse = b.empty({rows}, DType::F32);
  // Rows per chunk from a fixed budget of f32 logits, never from the machine (threads, memory):
  // the chunks decide the order of the gradients' sums, and so their last bits.
  const int64_t chunk = classifier_chunk_rows(config_, rows, shard);
  Tensor block = b.empty({chunk, shard}, DType::F32);
  Tensor bias;
  if (bias_) {
    bias = b.empty({shard}, DType::F32);
    b.copy(bias_->value, bias);
  }
  const tensor::VocabShard vocab{.first = tp_.shard_begin(config_.padded_vocab),
                                 .partial = tp_.active()};
  s.dfeatures = b.empty({rows, config_.hidden}, config_.dtype);
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    const int64_t end = std::min(rows, begin + chunk);
    const Tensor features = s.features.slice(begin, end), labels = batch.labels.slice(begin, end);
    Tensor logits = block.slice(0, end - begin);  // [chunk, V/TP] f32
    b.gemm(features, false, output_.value, true, logits);
    if (bias_) b.bias_add(logits, bias);
    Tensor chunk_loss = loss.slice(begin, end), chunk_lse = lse.slice(begin, end);
    b.cross_entropy_forward(logits, labels, chunk_loss, chunk_lse, vocab);
    // Every tensor-parallel rank holds the same rows, so each chunk's collectives pair up.
    if (tp_.active()) combine_vocab_shards(b, chunk_loss, chunk_lse);
    // The logits' gradient overwrites them in place, as in backward.
    b.cross_entropy_backward(logits, labels, chunk_lse, dloss.slice(begin, end), logits, vocab);
    output_backward(b, logits, features, s.dfeatures.slice(begin, end));
  }
  s.features = {};
  losses.lm += b.dot(loss, batch.loss_mask);
  losses.tokens += tokens;
  if (outputs && outputs->want_token_losses) outputs->token_losses = loss;
}

void LmHead::output_backward(tensor::Backend& b, const Tensor& dlogits, const Tensor& features,
                             Tensor dfeatures) const {
  const int64_t rows = dlogits.dim(0), vocab = dlogits.dim(1);  // this rank's shard
  if (bias_) b.bias_grad(dlogits, bias_->grad);
  if (config_.dtype == DType::F32) {
    b.gemm(dlogits, true, features, false, output_.grad, 1.0f, 1.0f);
    b.gemm(dlogits, false, output_.value, false, dfeatures);
    return;
  }
  // As Megatron, the gradient leaves the f32 loss in the model's dtype; it is narrowed a block
  // of rows at a time, so no second vocabulary-sized tensor ever exists.
  const int64_t block_rows = std::clamp<int64_t>((int64_t{1} << 22) / vocab, 1, rows);
  Tensor narrow = b.empty({block_rows, vocab}, config_.dtype);
  for (int64_t first = 0; first < rows; first += block_rows) {
    const int64_t last = std::min(rows, first + block_rows);
    Tensor block = narrow.slice(0, last - first);
    b.copy(dlogits.slice(first, last), block);
    b.gemm(block, true, features.slice(first, last), false, output_.grad, 1.0f, 1.0f);
    Tensor dx = dfeatures.slice(first, last);
    b.gemm(block, false, output_.value, false, dx);
  }
}

Tensor LmHead::backward(const Pass& pass, const Batch& batch, LmHeadSaved& s,
                        float token_grad) const {
  tensor::Backend& b = pass.backend;
  Tensor dfeatures = std::move(s.dfeatures);  // fused: computed in the forward
  if (!dfeatures.defined()) {
    Tensor dloss = b.empty({batch.rows()}, DType::F32);
    b.copy(batch.loss_mask, dloss);
    b.scale(dloss, token_grad);
    // The logits' gradient overwrites them in place: no second vocabulary-sized tensor.
    Tensor dlogits = std::move(s.logits);
    const tensor::VocabShard shard{.first = tp_.shard_begin(config_.padded_vocab),
                                   .partial = tp_.active()};
    b.cross_entropy_backward(dlogits, batch.labels, s.lse, dloss, dlogits, shard);
    s.lse = {};
    dfeatures = b.empty({batch.rows(), config_.hidden}, config_.dtype);
    output_backward(b, dlogits, s.features, dfeatures);
    dlogits = {};
    s.features = {};
  }
  Tensor dx = parallel::reduce_partial(b, tp_, dfeatures);
  if (dense_) {
    Tensor dact = norm_->backward(b, dx, s.act, s.norm);
    s.act = {};
    Tensor ddense = b.empty(s.dense.shape(), s.dense.dtype());
    b.gelu_backward(dact, s.dense, ddense, false);
    s.dense = {};
    dx = dense_->backward(b, ddense, s.input);
  }
  s = {};
  return dx;
}

}  // namespace megatron::model
