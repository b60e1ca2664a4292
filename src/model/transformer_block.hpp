// One pre-norm transformer block: x + dropout(attn(norm(x))), then + dropout(mlp(norm(.))),
// with explicit forward and backward, the activations it keeps spelled out, and Megatron's
// tensor parallelism (heads and FFN split; sequence-parallel norms and dropout). The block is
// assembled once from its spec (model/block_spec.hpp): its attention cores, norms and MLP; a T5
// decoder block adds cross-attention over the encoder output between the two.
#pragma once

#include <memory>
#include <string>

#include "model/attention_core.hpp"
#include "model/batch.hpp"
#include "model/block_spec.hpp"
#include "model/kv_cache.hpp"
#include "model/model_config.hpp"
#include "model/linear.hpp"
#include "model/mlp.hpp"
#include "model/norm.hpp"
#include "model/pass.hpp"

namespace megatron::model {

// What the block keeps for backward. Which members are set depends on `Keep`.
struct BlockActivations {
  tensor::Tensor input;  // always
  Norm::Saved norm1;
  tensor::Tensor ln1;  // the whole sequence (gathered under sequence parallelism)
  tensor::Tensor qkv;  // after rotary
  tensor::Tensor qkv_in;  // q/k norm: the projection's output, before the norms
  tensor::Tensor qk_rstd;
  AttentionOutput attn;  // the attention core's output; dropped under selective recompute
  tensor::Tensor mid;   // x + dropout(attention projection)
  Norm::Saved norm2;
  tensor::Tensor ln2;  // the whole sequence
  MlpSaved mlp;
  // Decoder blocks: mid2 = mid + dropout(proj(cross(q(norm(mid)), kv(memory)))), the MLP's
  // residual input.
  Norm::Saved norm_x;
  tensor::Tensor lnx;    // the whole sequence
  tensor::Tensor xq;     // cross-attention queries
  tensor::Tensor xkv;    // its keys and values, from the encoder output
  AttentionOutput xattn;  // its core's output; dropped under selective recompute
  tensor::Tensor mid2;
};

// The encoder output a decoder block attends to: every row of the sequence (gathered under
// sequence parallelism), [batch * seq, hidden] of the model's dtype, with its padding mask.
struct EncoderMemory {
  tensor::Tensor states;
  int64_t seq = 0;
  std::vector<int64_t> key_lengths;  // empty: every key
};

enum class Keep {
  Nothing,        // evaluation: no backward follows
  Everything,     // no recompute
  AllButCore,     // selective recompute: the attention core is run again in backward
  InputOnly,      // full recompute: the whole block is run again in backward
};

class TransformerBlock {
 public:
  TransformerBlock(ParameterSet& params, const ModelConfig& config, int64_t layer, BlockSpec spec);
  const BlockSpec& spec() const { return spec_; }
  int64_t layer() const { return layer_; }

  // x: this rank's rows of the hidden states ([batch * seq / tp, hidden] under sequence
  // parallelism, else all of them) of `batch`, which gives the shape and the padding mask.
  // `memory`: the encoder output, for a block with cross-attention only.
  tensor::Tensor forward(const Pass& pass, const tensor::Tensor& x, const Batch& batch,
                         BlockActivations& saved, Keep keep,
                         const EncoderMemory* memory = nullptr) const;
  // Generation: the `seq` new tokens of each of `batch` sequences (x [batch * seq, hidden], no
  // sequence parallelism), at positions start.. after the cache's first `start`; their keys and
  // values join the cache. No dropout, nothing kept.
  tensor::Tensor forward_cached(tensor::Backend& backend, const tensor::Tensor& x, int64_t batch,
                                int64_t seq, int64_t start, LayerCache& cache) const;
  // Continuous batching: row r of x is a token at rows.positions[r] of its sequence, whose keys
  // and values live in the pool blocks rows names; its key and value join them.
  tensor::Tensor forward_paged(tensor::Backend& backend, const tensor::Tensor& x,
                               const PagedRows& rows, LayerCache& pool) const;
  // An empty cache for `batch` sequences of up to `capacity` positions.
  LayerCache make_cache(tensor::Backend& backend, int64_t batch, int64_t capacity) const;
  // Consumes `saved`; returns dx. A block with cross-attention adds its share of the gradient
  // of memory->states to *dmemory (a partial sum over tensor-parallel ranks, every row).
  tensor::Tensor backward(const Pass& pass, const tensor::Tensor& dy, const Batch& batch,
                          BlockActivations& saved, const EncoderMemory* memory = nullptr,
                          tensor::Tensor* dmemory = nullptr) const;

 private:
  // What the self- and cross-attention cores attend over in `batch`.
  AttentionInputs self_inputs(const Batch& batch) const;
  AttentionInputs cross_inputs(const Batch& batch, const EncoderMemory& memory) const;
  // mid -> mid2 (decoder blocks), keeping what backward needs in `saved` when asked.
  tensor::Tensor cross_forward(const Pass& pass, const tensor::Tensor& mid, const Batch& batch,
                               const EncoderMemory& memory, BlockActivations& saved, Keep keep) const;
  // d mid2 -> the gradient of mid through the cross-attention (and its residual).
  tensor::Tensor cross_backward(const Pass& pass, const tensor::Tensor& dmid2, const Batch& batch,
                                const EncoderMemory& memory, tensor::Tensor& dmemory,
                                BlockActivations& saved) const;
  // Generation's step: the cache the self-attention reads and extends, and where the new tokens
  // start in it.
  struct CacheStep {
    LayerCache& cache;
    int64_t start = 0;
    const PagedRows* paged = nullptr;  // set: the cache is a pool of blocks
  };
  // forward and forward_cached: one body, whose self-attention runs over the cache when `step` is
  // set.
  tensor::Tensor run_forward(const Pass& pass, const tensor::Tensor& x, const Batch& batch,
                             BlockActivations& saved, Keep keep, const EncoderMemory* memory,
                             CacheStep* step) const;
  // Dropout on this rank's rows of the hidden states draws what those rows draw in one process.
  tensor::RngKey hidden_key(const Pass& pass, DropoutSite site, const Batch& batch) const;
  // This rank's heads of `batch` x `seq` fused qkv rows.
  tensor::AttentionShape qkv_shape(int64_t batch, int64_t seq) const;

  const ModelConfig& config_;  // sizes and dropout rates; what the block is made of is spec_
  BlockSpec spec_;
  parallel::TensorParallel tp_;
  int64_t groups_;  // key/value heads on this rank (the cache holds them)
  int64_t layer_;
  AttentionCore self_core_;
  Norm norm1_;
  Linear qkv_;
  Parameter* q_norm_ = nullptr;  // spec_.qk_norm: [head_dim] weights on every query head
  Parameter* k_norm_ = nullptr;  // and every key head
  Linear proj_;
  Norm norm2_;
  Mlp mlp_;
  // Decoder blocks only.
  std::unique_ptr<Norm> norm_x_;
  std::unique_ptr<Linear> xq_, xkv_, xproj_;
  std::unique_ptr<AttentionCore> cross_core_;
};

}  // namespace megatron::model
