// One attention core of a transformer block, built from its spec: the backend op chosen once
// (flash over the fused qkv, or the score op with a bias or separate keys and values), the rotary
// positions around it, its mask and dropout. The one attention entry every block calls.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.hpp"
#include "model/pass.hpp"
#include "model/rng_streams.hpp"
#include "tensor/attention_spec.hpp"
#include "tensor/backend.hpp"

namespace megatron::model {

// This rank's heads of the layer (a tensor-parallel shard of them).
struct AttentionHeads {
  int64_t heads = 0;        // query heads on this rank
  int64_t groups = 0;       // key/value heads on this rank
  int64_t head_dim = 0;
  int64_t head_offset = 0;  // the first of this rank's heads among the layer's
  int64_t total_heads = 0;  // the layer's query heads: dropout draws what they draw in one process
};

// What one call attends over, besides the tensors: the batch's shape and masks, and the score
// bias when the spec has one (the model's tensor, shared by every sequence; its gradient sums
// into bias_grad).
struct AttentionInputs {
  int64_t batch = 0;
  int64_t q_seq = 0;
  int64_t kv_seq = 0;  // q_seq for self-attention
  const std::vector<int64_t>* key_lengths = nullptr;  // the padding mask; null or empty: every key
  const std::vector<int64_t>* first_keys = nullptr;   // packed documents (self-attention only)
  const tensor::Tensor* bias = nullptr;
  tensor::Tensor bias_grad;  // a handle to the model's tensor
};

struct AttentionOutput {
  tensor::Tensor out;  // [batch * q_seq, heads * head_dim], the inputs' dtype
  tensor::Tensor lse;  // [batch, heads, q_seq] f32: what backward needs besides out
};

class AttentionCore {
 public:
  AttentionCore(const tensor::AttentionSpec& spec, AttentionHeads heads,
                tensor::RotaryOptions rotary, double dropout, int64_t layer, DropoutSite site);
  const tensor::AttentionSpec& spec() const { return spec_; }

  // Rotary positions on the fused qkv, in place, its tokens at positions start.. of each sequence
  // (inverse: on its gradient); nothing without them.
  void position(tensor::Backend& b, tensor::Tensor& qkv, int64_t batch, int64_t seq, int64_t start,
                bool inverse) const;
  // Self-attention reads q as the fused qkv (kv null); cross-attention reads q [rows, heads *
  // head_dim] and the encoder's kv [batch * kv_seq, 2 * groups * head_dim].
  AttentionOutput forward(const Pass& pass, const tensor::Tensor& q, const tensor::Tensor* kv,
                          const AttentionInputs& in) const;
  // Writes dq (and dkv for cross-attention); a score bias's gradient sums into in.bias_grad.
  void backward(const Pass& pass, const tensor::Tensor& q, const tensor::Tensor* kv,
                const AttentionOutput& saved, const tensor::Tensor& dout,
                const AttentionInputs& in, tensor::Tensor& dq, tensor::Tensor* dkv) const;
  // Generation: the `seq` new tokens of `batch` sequences (their fused qkv, positioned), after
  // the cache's first `start`; their keys and values join the cache. Specs with kv_cache only.
  tensor::Tensor forward_cached(tensor::Backend& b, const tensor::Tensor& qkv, int64_t batch,
                                int64_t seq, int64_t start, LayerCache& cache) const;
  // Continuous batching: rotary positions for rows at their own positions (qkv [rows, ...]), and
  // the attention of each row over its sequence's blocks in the pool.
  void position_rows(tensor::Backend& b, tensor::Tensor& qkv, const std::vector<int32_t>& positions) const;
  tensor::Tensor forward_paged(tensor::Backend& b, const tensor::Tensor& qkv, const PagedRows& rows,
                               LayerCache& pool) const;

 private:
  tensor::AttentionShape self_shape(int64_t batch, int64_t seq) const;
  tensor::CrossAttentionShape scores_shape(const AttentionInputs& in) const;
  tensor::AttentionOptions options(const Pass& pass, const AttentionInputs& in) const;

  tensor::AttentionSpec spec_;
  tensor::AttentionKernel kernel_;
  AttentionHeads heads_;
  tensor::RotaryOptions rotary_;
  double dropout_;
  int64_t layer_;
  DropoutSite site_;
};

}  // namespace megatron::model
