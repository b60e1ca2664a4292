#include "model/transformer_block.hpp"

#include <cmath>
#include <stdexcept>

#include "model/parameter_names.hpp"

namespace megatron::model {

using tensor::Tensor;

namespace {

std::string prefix(const ModelConfig& c, int64_t layer) {
  return block_prefix(layer, c.encoder_decoder ? c.num_layers : 0);
}

AttentionHeads heads_of(const ModelConfig& c, const parallel::TensorParallel& tp) {
  return {.heads = tp.shard(c.heads), .groups = tp.shard(c.groups), .head_dim = c.head_dim,
          .head_offset = tp.shard_begin(c.heads), .total_heads = c.heads};
}

tensor::RotaryOptions rotary_of(const ModelConfig& c) {
  using Kind = tensor::RotaryScaling::Kind;
  return {.rotary_dim = c.rotary_dim(),
          .base = c.rotary_base,
          .scaling = {.kind = c.rope_scaling == RopeScaling::Linear   ? Kind::Linear
                              : c.rope_scaling == RopeScaling::Llama3 ? Kind::Llama3
                              : c.rope_scaling == RopeScaling::Yarn   ? Kind::Yarn
                                                                      : Kind::None,
                      .factor = c.rope_scaling_factor,
                      .original_max_positions = static_cast<double>(c.rope_original_max_positions),
                      .low_freq_factor = c.rope_low_freq_factor,
                      .high_freq_factor = c.rope_high_freq_factor,
                      .beta_fast = c.rope_beta_fast,
                      .beta_slow = c.rope_beta_slow,
                      .truncate = c.rope_truncate,
                      .attention_factor = c.rope_scaling == RopeScaling::Yarn ? c.rope_attention_factor : 1.0}};
}

// One of a layer's q/k norm weights (Megatron-Core's q_layernorm / k_layernorm): [head_dim],
// shared by the layer's heads, so each tensor-parallel rank's gradient is a partial sum.
Parameter& qk_norm_weight(ParameterSet& params, const std::string& name, const ModelConfig& c) {
  if (c.norm != NormKind::RmsNorm) {
    throw std::invalid_argument("q/k norms are RMS norms: the model's normalization must be rmsnorm");
  }
  Parameter& p = params.add(name + ".weight", {c.head_dim}, Init::Ones, TpSplit::None, false);
  p.tp_partial_grad = true;
  return p;
}

}  // namespace

tensor::AttentionShape TransformerBlock::qkv_shape(int64_t batch, int64_t seq) const {
  return {.batch = batch, .seq = seq, .heads = tp_.shard(config_.heads), .groups = groups_,
          .head_dim = config_.head_dim};
}

TransformerBlock::TransformerBlock(ParameterSet& params, const ModelConfig& c, int64_t layer,
                                   BlockSpec spec)
    : config_(c),
      spec_(spec),
      tp_(params.tp()),
      groups_(tp_.shard(c.groups)),
      layer_(layer),
      self_core_(spec.self_attention, heads_of(c, tp_), rotary_of(c), c.attention_dropout, layer,
                 DropoutSite::AttentionProbs),
      norm1_(params, prefix(c, layer) + "input_layernorm", c.hidden, spec.norm, c.norm_eps),
      qkv_(params, prefix(c, layer) + "self_attention.linear_qkv", c.hidden,
           (c.heads + 2 * c.groups) * c.head_dim, c.qkv_bias, Init::Normal, TpSplit::Rows),
      q_norm_(spec.qk_norm ? &qk_norm_weight(params, prefix(c, layer) + "self_attention.q_layernorm", c)
                           : nullptr),
      k_norm_(spec.qk_norm ? &qk_norm_weight(params, prefix(c, layer) + "self_attention.k_layernorm", c)
                           : nullptr),
      proj_(params, prefix(c, layer) + "self_attention.linear_proj", c.heads * c.head_dim, c.hidden,
            c.linear_bias, Init::ScaledNormal, TpSplit::Columns),
      norm2_(params, prefix(c, layer) + "pre_mlp_layernorm", c.hidden, spec.norm, c.norm_eps),
      mlp_(params, prefix(c, layer), c, spec.mlp) {
  if (!spec_.cross_attention) return;
  cross_core_ = std::make_unique<AttentionCore>(*spec_.cross_attention, heads_of(c, tp_),
                                                rotary_of(c), c.attention_dropout, layer,
                                                DropoutSite::CrossAttentionProbs);
  // Megatron-Core's CrossAttention: linear_q from the decoder stream, linear_kv (each group's
  // key then value) from the encoder output, both column-parallel; linear_proj row-parallel.
  const std::string p = prefix(c, layer);
  norm_x_ = std::make_unique<Norm>(params, p + "pre_cross_attn_layernorm", c.hidden, spec.norm,
                                   c.norm_eps);
  xq_ = std::make_unique<Linear>(params, p + "cross_attention.linear_q", c.hidden,
                                 c.heads * c.head_dim, c.qkv_bias, Init::Normal, TpSplit::Rows);
  xkv_ = std::make_unique<Linear>(params, p + "cross_attention.linear_kv", c.hidden,
                                  2 * c.groups * c.head_dim, c.qkv_bias, Init::Normal, TpSplit::Rows);
  xproj_ = std::make_unique<Linear>(params, p + "cross_attention.linear_proj", c.heads * c.head_dim,
                                    c.hidden, c.linear_bias, Init::ScaledNormal, TpSplit::Columns);
}

AttentionInputs TransformerBlock::self_inputs(const Batch& batch) const {
  return {.batch = batch.batch,
          .q_seq = batch.seq,
          .kv_seq = batch.seq,
          .key_lengths = &batch.key_lengths,
          .first_keys = &batch.first_keys,
          .bias = &batch.score_bias,
          .bias_grad = batch.score_bias_grad};
}

AttentionInputs TransformerBlock::cross_inputs(const Batch& batch,
                                               const EncoderMemory& memory) const {
  return {.batch = batch.batch,
          .q_seq = batch.seq,
          .kv_seq = memory.seq,
          .key_lengths = &memory.key_lengths};
}

Tensor TransformerBlock::cross_forward(const Pass& pass, const Tensor& mid, const Batch& batch,
                                       const EncoderMemory& memory, BlockActivations& saved,
                                       Keep keep) const {
  tensor::Backend& b = pass.backend;
  Norm::Saved norm_x;
  Tensor lnx = parallel::gather_sequence(b, tp_, norm_x_->forward(b, mid, norm_x));
  Tensor xq = xq_->forward(b, lnx);
  Tensor xkv = xkv_->forward(b, memory.states);
  AttentionOutput xattn = cross_core_->forward(pass, xq, &xkv, cross_inputs(batch, memory));
  Tensor mid2 = b.empty(mid.shape(), mid.dtype());
  {
    Tensor proj = parallel::reduce_partial(b, tp_, xproj_->forward(b, xattn.out));
    xproj_->bias_dropout_add(b, proj, mid, mid2, pass.dropout(config_.hidden_dropout),
                             hidden_key(pass, DropoutSite::CrossAttentionOut, batch));
  }
  if (keep == Keep::Nothing || keep == Keep::InputOnly) return mid2;
  saved.norm_x = std::move(norm_x);
  saved.lnx = std::move(lnx);
  saved.xq = std::move(xq);
  saved.xkv = std::move(xkv);
  if (keep == Keep::Everything) saved.xattn = std::move(xattn);
  return mid2;
}

Tensor TransformerBlock::cross_backward(const Pass& pass, const Tensor& dmid2, const Batch& batch,
                                        const EncoderMemory& memory, Tensor& dmemory,
                                        BlockActivations& saved) const {
  tensor::Backend& b = pass.backend;
  const AttentionInputs inputs = cross_inputs(batch, memory);
  if (!saved.xattn.out.defined()) saved.xattn = cross_core_->forward(pass, saved.xq, &saved.xkv, inputs);
  Tensor dproj = b.empty(dmid2.shape(), dmid2.dtype());
  b.dropout_backward(dmid2, dproj, pass.dropout(config_.hidden_dropout),
                     hidden_key(pass, DropoutSite::CrossAttentionOut, batch));
  xproj_->bias_grad(b, dproj);
  Tensor dxattn = xproj_->backward(b, parallel::gather_sequence(b, tp_, dproj), saved.xattn.out);
  dproj = {};
  Tensor dxq = b.empty(saved.xq.shape(), dmid2.dtype());
  Tensor dxkv = b.empty(saved.xkv.shape(), dmid2.dtype());
  cross_core_->backward(pass, saved.xq, &saved.xkv, saved.xattn, dxattn, inputs, dxq, &dxkv);
  saved.xattn = {};
  saved.xq = {};
  saved.xkv = {};
  b.add(dmemory, xkv_->backward(b, dxkv, memory.states), dmemory);
  Tensor dlnx = parallel::reduce_partial(b, tp_, xq_->backward(b, dxq, saved.lnx));
  saved.lnx = {};
  // The residual's gradient and the norm's, summed into a new tensor (no copy first).
  Tensor dmid = b.empty(dmid2.shape(), dmid2.dtype());
  b.add(dmid2, norm_x_->backward(b, dlnx, saved.mid, saved.norm_x), dmid);
  return dmid;
}

tensor::RngKey TransformerBlock::hidden_key(const Pass& pass, DropoutSite site,
                                            const Batch& batch) const {
  tensor::RngKey key = pass.dropout_key(layer_, site);
  key.offset = uint64_t(tp_.first_row(batch.rows()) * config_.hidden);
  return key;
}

Tensor TransformerBlock::forward(const Pass& pass, const Tensor& x, const Batch& batch,
                                 BlockActivations& saved, Keep keep,
                                 const EncoderMemory* memory) const {
  return run_forward(pass, x, batch, saved, keep, memory, nullptr);
}

Tensor TransformerBlock::forward_cached(tensor::Backend& b, const Tensor& x, int64_t batch,
                                        int64_t seq, int64_t start, LayerCache& cache) const {
  if (tp_.sequence_parallel || spec_.cross_attention) {
    throw std::logic_error("forward_cached: generation runs decoder-only blocks without sequence "
                           "parallelism");
  }
  // The same forward as training's without dropout, whose attention reads and extends the cache.
  const Pass pass{.backend = b, .training = false};
  BlockActivations unused;
  CacheStep step{.cache = cache, .start = start};
  return run_forward(pass, x, Batch{.batch = batch, .seq = seq}, unused, Keep::Nothing, nullptr,
                     &step);
}

Tensor TransformerBlock::forward_paged(tensor::Backend& b, const Tensor& x, const PagedRows& rows,
                                       LayerCache& pool) const {
  if (tp_.sequence_parallel || spec_.cross_attention) {
    throw std::logic_error("forward_paged: generation runs decoder-only blocks without sequence "
                           "parallelism");
  }
  const Pass pass{.backend = b, .training = false};
  BlockActivations unused;
  CacheStep step{.cache = pool, .start = 0, .paged = &rows};
  return run_forward(pass, x, Batch{.batch = int64_t(rows.positions.size()), .seq = 1}, unused,
                     Keep::Nothing, nullptr, &step);
}

Tensor TransformerBlock::run_forward(const Pass& pass, const Tensor& x, const Batch& batch,
                                     BlockActivations& saved, Keep keep,
                                     const EncoderMemory* memory, CacheStep* step) const {
  if (spec_.cross_attention.has_value() != (memory != nullptr)) {
    throw std::logic_error("TransformerBlock: the encoder output goes to decoder blocks only");
  }
  tensor::Backend& b = pass.backend;
  Norm::Saved norm1;
  Tensor ln1 = parallel::gather_sequence(b, tp_, norm1_.forward(b, x, norm1));
  Tensor qkv = qkv_.forward(b, ln1);
  Tensor qkv_in, qk_rstd;
  if (spec_.qk_norm) {
    const tensor::AttentionShape shape = qkv_shape(batch.batch, batch.seq);
    qkv_in = std::move(qkv);
    qkv = b.empty(qkv_in.shape(), qkv_in.dtype());
    qk_rstd = b.empty({qkv_in.dim(0) * (shape.heads + shape.groups)}, tensor::DType::F32);
    b.qk_norm_forward(qkv_in, shape, q_norm_->value, k_norm_->value, float(config_.norm_eps), qkv,
                      qk_rstd);
  }
  AttentionOutput attn;
  if (step && step->paged) {
    self_core_.position_rows(b, qkv, step->paged->positions);
    attn.out = self_core_.forward_paged(b, qkv, *step->paged, step->cache);
  } else {
    self_core_.position(b, qkv, batch.batch, batch.seq, step ? step->start : 0, false);
    attn = step ? AttentionOutput{.out = self_core_.forward_cached(b, qkv, batch.batch, batch.seq,
                                                                   step->start, step->cache)}
                : self_core_.forward(pass, qkv, nullptr, self_inputs(batch));
  }
  Tensor mid = b.empty(x.shape(), x.dtype());
  {
    Tensor proj = parallel::reduce_partial(b, tp_, proj_.forward(b, attn.out));
    proj_.bias_dropout_add(b, proj, x, mid, pass.dropout(config_.hidden_dropout),
                           hidden_key(pass, DropoutSite::AttentionOut, batch));
  }

  // A decoder block's MLP continues from its cross-attention's output.
  Tensor mid2 = memory ? cross_forward(pass, mid, batch, *memory, saved, keep) : Tensor();
  const Tensor& into_mlp = memory ? mid2 : mid;

  Norm::Saved norm2;
  Tensor ln2 = parallel::gather_sequence(b, tp_, norm2_.forward(b, into_mlp, norm2));
  MlpSaved mlp;
  Tensor y = b.empty(x.shape(), x.dtype());
  {
    const bool kept = keep == Keep::Everything || keep == Keep::AllButCore;
    Tensor out = parallel::reduce_partial(b, tp_, mlp_.forward(b, ln2, mlp, kept));
    mlp_.bias_dropout_add(b, out, into_mlp, y, pass.dropout(config_.hidden_dropout),
                          hidden_key(pass, DropoutSite::MlpOut, batch));
  }

  if (keep == Keep::Nothing) return y;
  saved.input = x;
  if (keep == Keep::InputOnly) return y;
  saved.norm1 = std::move(norm1);
  saved.ln1 = std::move(ln1);
  saved.qkv = std::move(qkv);
  saved.qkv_in = std::move(qkv_in);
  saved.qk_rstd = std::move(qk_rstd);
  if (keep == Keep::Everything) saved.attn = std::move(attn);
  saved.mid = std::move(mid);
  saved.mid2 = std::move(mid2);
  saved.norm2 = std::move(norm2);
  saved.ln2 = std::move(ln2);
  saved.mlp = std::move(mlp);
  return y;
}

LayerCache TransformerBlock::make_cache(tensor::Backend& b, int64_t batch, int64_t capacity) const {
  const tensor::Shape shape{batch, groups_, capacity, config_.head_dim};
  return {.k = b.zeros(shape, config_.dtype), .v = b.zeros(shape, config_.dtype)};
}

Tensor TransformerBlock::backward(const Pass& pass, const Tensor& dy, const Batch& batch,
                                  BlockActivations& saved, const EncoderMemory* memory,
                                  Tensor* dmemory) const {
  tensor::Backend& b = pass.backend;
  if (spec_.cross_attention.has_value() != (memory != nullptr && dmemory != nullptr)) {
    throw std::logic_error("TransformerBlock: a decoder block's backward needs the encoder output");
  }
  if (!saved.qkv.defined()) {
    // Full recompute: run the block again from its input, keeping everything this time.
    // Dropout draws from the same streams, so the recomputed activations are identical.
    const Tensor input = saved.input;
    forward(pass, input, batch, saved, Keep::Everything, memory);
  }
  const AttentionInputs inputs = self_inputs(batch);
  // Selective recompute: the core again, from the kept (already rotated) qkv.
  if (!saved.attn.out.defined()) saved.attn = self_core_.forward(pass, saved.qkv, nullptr, inputs);

  // MLP: y = mid + dropout(fc2(act(fc1(norm2(mid))))). The residual's gradient dy and the
  // norm's are summed in one add into a new tensor, not copied first and added in place: one
  // pass over the hidden states fewer, the same values.
  Tensor dmid;
  {
    Tensor dfc2 = b.empty(dy.shape(), dy.dtype());
    b.dropout_backward(dy, dfc2, pass.dropout(config_.hidden_dropout),
                       hidden_key(pass, DropoutSite::MlpOut, batch));
    mlp_.bias_grad(b, dfc2);
    Tensor dln2 = parallel::reduce_partial(
        b, tp_, mlp_.backward(b, parallel::gather_sequence(b, tp_, dfc2), saved.ln2, saved.mlp));
    saved.ln2 = {};
    Tensor dnorm2 = norm2_.backward(b, dln2, memory ? saved.mid2 : saved.mid, saved.norm2);
    dmid = b.empty(dy.shape(), dy.dtype());
    b.add(dy, dnorm2, dmid);
    saved.mid2 = {};
  }
  // Until here dmid was the gradient of the MLP's input: mid2 in a decoder block.
  if (memory) dmid = cross_backward(pass, dmid, batch, *memory, *dmemory, saved);
  saved.mid = {};

  // Attention: mid = x + dropout(proj(core(qkv(norm1(x)))))
  Tensor dx;
  {
    Tensor dproj = b.empty(dy.shape(), dy.dtype());
    b.dropout_backward(dmid, dproj, pass.dropout(config_.hidden_dropout),
                       hidden_key(pass, DropoutSite::AttentionOut, batch));
    proj_.bias_grad(b, dproj);
    Tensor dattn = proj_.backward(b, parallel::gather_sequence(b, tp_, dproj), saved.attn.out);
    Tensor dqkv = b.empty(saved.qkv.shape(), dy.dtype());
    self_core_.backward(pass, saved.qkv, nullptr, saved.attn, dattn, inputs, dqkv, nullptr);
    saved.attn = {};
    saved.qkv = {};
    self_core_.position(b, dqkv, batch.batch, batch.seq, 0, true);
    if (spec_.qk_norm) {
      Tensor dqkv_in = b.empty(dqkv.shape(), dqkv.dtype());
      b.qk_norm_backward(dqkv, saved.qkv_in, qkv_shape(batch.batch, batch.seq), q_norm_->value,
                         k_norm_->value, saved.qk_rstd, dqkv_in, q_norm_->grad, k_norm_->grad);
      dqkv = std::move(dqkv_in);
      saved.qkv_in = {};
      saved.qk_rstd = {};
    }
    Tensor dln1 = parallel::reduce_partial(b, tp_, qkv_.backward(b, dqkv, saved.ln1));
    saved.ln1 = {};
    Tensor dnorm1 = norm1_.backward(b, dln1, saved.input, saved.norm1);
    dx = b.empty(dy.shape(), dy.dtype());
    b.add(dmid, dnorm1, dx);
    dmid = {};
  }
  saved = {};
  return dx;
}

}  // namespace megatron::model
