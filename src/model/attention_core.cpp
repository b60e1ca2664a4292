#include "model/attention_core.hpp"

#include <cmath>
#include <stdexcept>

namespace megatron::model {

using tensor::Tensor;

AttentionCore::AttentionCore(const tensor::AttentionSpec& spec, AttentionHeads heads,
                             tensor::RotaryOptions rotary, double dropout, int64_t layer,
                             DropoutSite site)
    : spec_(spec),
      kernel_(tensor::attention_kernel(spec)),
      heads_(heads),
      rotary_(rotary),
      dropout_(dropout),
      layer_(layer),
      site_(site) {}

tensor::AttentionShape AttentionCore::self_shape(int64_t batch, int64_t seq) const {
  return {.batch = batch, .seq = seq, .heads = heads_.heads, .groups = heads_.groups,
          .head_dim = heads_.head_dim};
}

tensor::CrossAttentionShape AttentionCore::scores_shape(const AttentionInputs& in) const {
  return {.batch = in.batch, .q_seq = in.q_seq, .kv_seq = in.kv_seq, .heads = heads_.heads,
          .groups = heads_.groups, .head_dim = heads_.head_dim, .packed = !spec_.cross};
}

tensor::AttentionOptions AttentionCore::options(const Pass& pass, const AttentionInputs& in) const {
  tensor::AttentionOptions o{.scale = float(1.0 / std::sqrt(double(heads_.head_dim))),
                             .causal = spec_.mask == tensor::AttentionMask::Causal,
                             .dropout = pass.dropout(dropout_),
                             .rng = pass.dropout_key(layer_, site_),
                             .head_offset = heads_.head_offset,
                             .total_heads = heads_.total_heads};
  if (in.key_lengths) o.key_lengths = *in.key_lengths;
  if (in.first_keys) o.first_keys = *in.first_keys;
  if (spec_.score_bias) {
    if (!in.bias || !in.bias->defined()) {
      throw std::logic_error("AttentionCore: a score-bias attention was called without its bias");
    }
    o.bias = in.bias;
    o.bias_columns = heads_.heads;
  }
  return o;
}

void AttentionCore::position(tensor::Backend& b, Tensor& qkv, int64_t batch, int64_t seq,
                             int64_t start, bool inverse) const {
  if (!spec_.rotary) return;
  tensor::RotaryOptions at = rotary_;
  at.position_offset = start;
  b.rotary(qkv, self_shape(batch, seq), at, inverse);
}

void AttentionCore::position_rows(tensor::Backend& b, Tensor& qkv,
                                  const std::vector<int32_t>& positions) const {
  if (!spec_.rotary) return;
  // Rows at consecutive positions (a prompt's chunk) rotate in one call; the angles depend on
  // the position alone, so a run may cross from one sequence into the next.
  const int64_t rows = int64_t(positions.size());
  for (int64_t begin = 0; begin < rows;) {
    int64_t end = begin + 1;
    while (end < rows && positions[size_t(end)] == positions[size_t(end - 1)] + 1) ++end;
    Tensor run = qkv.slice(begin, end);
    tensor::RotaryOptions at = rotary_;
    at.position_offset = positions[size_t(begin)];
    b.rotary(run, self_shape(1, end - begin), at, false);
    begin = end;
  }
}

Tensor AttentionCore::forward_paged(tensor::Backend& b, const Tensor& qkv, const PagedRows& rows,
                                    LayerCache& pool) const {
  if (!spec_.kv_cache) {
    throw std::logic_error("AttentionCore: this layer's attention runs without a key/value cache");
  }
  const int64_t n = int64_t(rows.positions.size());
  Tensor out = b.empty({n, heads_.heads * heads_.head_dim}, qkv.dtype());
  b.attention_paged(qkv, self_shape(n, 1), rows.device_positions, rows.device_tables,
                    float(1.0 / std::sqrt(double(heads_.head_dim))), pool.k, pool.v, out);
  return out;
}

AttentionOutput AttentionCore::forward(const Pass& pass, const Tensor& q, const Tensor* kv,
                                       const AttentionInputs& in) const {
  if (spec_.cross != (kv != nullptr)) {
    throw std::logic_error("AttentionCore: keys and values apart from queries are cross-attention's");
  }
  tensor::Backend& b = pass.backend;
  AttentionOutput r{
      .out = b.empty({in.batch * in.q_seq, heads_.heads * heads_.head_dim}, q.dtype()),
      .lse = b.empty({in.batch, heads_.heads, in.q_seq}, tensor::DType::F32)};
  if (kernel_ == tensor::AttentionKernel::Flash) {
    b.attention_forward(q, self_shape(in.batch, in.q_seq), options(pass, in), r.out, r.lse);
  } else {
    b.cross_attention_forward(q, kv ? *kv : q, scores_shape(in), options(pass, in), r.out, r.lse);
  }
  return r;
}

void AttentionCore::backward(const Pass& pass, const Tensor& q, const Tensor* kv,
                             const AttentionOutput& saved, const Tensor& dout,
                             const AttentionInputs& in, Tensor& dq, Tensor* dkv) const {
  if (spec_.cross != (kv != nullptr && dkv != nullptr)) {
    throw std::logic_error("AttentionCore: cross-attention's backward takes keys and values");
  }
  tensor::Backend& b = pass.backend;
  if (kernel_ == tensor::AttentionKernel::Flash) {
    b.attention_backward(q, saved.out, dout, saved.lse, self_shape(in.batch, in.q_seq),
                         options(pass, in), dq);
    return;
  }
  Tensor bias_grad = in.bias_grad;  // a handle: the model's tensor receives the sum
  b.cross_attention_backward(q, kv ? *kv : q, saved.out, dout, saved.lse, scores_shape(in),
                             options(pass, in), dq, dkv ? *dkv : dq,
                             spec_.score_bias ? &bias_grad : nullptr);
}

Tensor AttentionCore::forward_cached(tensor::Backend& b, const Tensor& qkv, int64_t batch,
                                     int64_t seq, int64_t start, LayerCache& cache) const {
  if (!spec_.kv_cache) {
    throw std::logic_error("AttentionCore: this layer's attention runs without a key/value cache");
  }
  const tensor::AttentionShape shape = self_shape(batch, seq);
  Tensor out = b.empty({batch * seq, heads_.heads * heads_.head_dim}, qkv.dtype());
  b.attention_cached(qkv, shape, start, float(1.0 / std::sqrt(double(heads_.head_dim))), cache.k,
                     cache.v, out);
  return out;
}

}  // namespace megatron::model
