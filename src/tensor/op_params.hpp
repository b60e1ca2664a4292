// The plain parameter structs of the Backend's ops (shapes, options, optimizer steps, RNG keys):
// apart from the Backend so that kernels/ takes the same structs without the interface.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace megatron::tensor {

// Identifies one stream of random numbers: Philox4x32-10 keyed by `seed`, with counter
// (element index low, high, stream low, high). The caller derives `stream` from what the
// numbers are for (layer, site, iteration, micro-batch, tensor-parallel rank).
struct RngKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
  // Dropout and normal: added to every element index, so that a shard of a tensor (a
  // sequence-parallel slice of the hidden states, a tensor-parallel slice of a weight) draws
  // exactly the numbers the whole tensor would.
  uint64_t offset = 0;
};

// A vocab-parallel loss's shard: columns [first, first + v) of the vocabulary. Targets outside
// it contribute no target logit (loss[i] = lse[i]) and no one-hot.
struct VocabShard {
  int64_t first = 0;
  bool partial = false;  // false: the whole vocabulary, every target must lie inside
};

// Attention over a fused QKV projection. Per token, the row of `qkv` holds, for each of the
// `groups` key/value groups in turn, its heads/groups query heads, then its key head, then its
// value head, each `head_dim` wide (Megatron's layout, which splits evenly by groups under
// tensor parallelism). Tokens are ordered batch-major: row b * seq + t.
struct AttentionShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;   // query heads
  int64_t groups = 0;  // key/value heads; heads % groups == 0
  int64_t head_dim = 0;
  constexpr int64_t qkv_width() const { return (heads + 2 * groups) * head_dim; }
  // Where a head starts in a qkv row (the layout described above).
  constexpr int64_t query_column(int64_t head) const {
    const int64_t per_group = heads / groups;
    return ((head / per_group) * (per_group + 2) + head % per_group) * head_dim;
  }
  constexpr int64_t key_column(int64_t group) const {
    return (group * (heads / groups + 2) + heads / groups) * head_dim;
  }
  constexpr int64_t value_column(int64_t group) const { return key_column(group) + head_dim; }
};

struct AttentionOptions {
  float scale = 1.0f;    // applied to q.k, usually 1/sqrt(head_dim)
  bool causal = true;
  float dropout = 0.0f;  // on the attention probabilities
  // element index = ((b * total_heads + head_offset + h) * seq + i) * seq + j: a tensor-parallel
  // rank's heads draw what those heads draw in the whole model (total_heads 0: shape.heads).
  RngKey rng;
  int64_t head_offset = 0;
  int64_t total_heads = 0;
  // The padding mask (BERT, T5): sequence b attends to its keys 0..key_lengths[b]-1 only (with
  // `causal`, also only to keys up to the query); each length in 1..seq. Empty: every key.
  std::vector<int64_t> key_lengths;
  // Documents packed into one sequence (Megatron's reset_attention_mask): query row b * seq + i
  // attends only to keys at or after first_keys[b * seq + i], the first position of its
  // document, so attention never crosses a document boundary. Each entry lies in 0..i and they
  // never decrease along a sequence. Empty: key 0 for every query. The flash ops only.
  std::vector<int64_t> first_keys;
  // Materialised attention only (cross_attention_*): an additive f32 score bias shared by every
  // sequence of the batch (T5's relative positions): score(b, h, i, j) += bias[(i * kv_seq + j) *
  // bias_columns + bias_offset + h] for local head h. Null: none. The flash ops
  // (attention_forward, attention_backward) refuse a bias.
  const Tensor* bias = nullptr;
  int64_t bias_columns = 0;
  int64_t bias_offset = 0;
};

// Cross-attention (T5's decoder over the encoder output): queries from one tensor, keys and
// values from another, each with its own sequence length. With `packed`, self-attention over
// Megatron's fused QKV rows instead (T5's encoder and decoder self-attention with a position
// bias): q and kv are then one tensor [batch * seq, (heads + 2 * groups) * head_dim] laid out as
// AttentionShape describes, and q_seq == kv_seq.
struct CrossAttentionShape {
  int64_t batch = 0;
  int64_t q_seq = 0;   // query rows per sequence
  int64_t kv_seq = 0;  // key/value rows per sequence, at least 1
  int64_t heads = 0;   // query heads
  int64_t groups = 0;  // key/value heads; heads % groups == 0
  int64_t head_dim = 0;
  bool packed = false;
  // Not packed:
  // q: [batch * q_seq, heads * head_dim], head h at column h * head_dim (rows b * q_seq + i).
  // kv: [batch * kv_seq, 2 * groups * head_dim]: group g's key at column 2 * g * head_dim and its
  // value at (2 * g + 1) * head_dim (Megatron-Core's linear_kv layout), rows b * kv_seq + j.
  // Packed: both [batch * seq, qkv_width], the columns of AttentionShape's query_column,
  // key_column and value_column. Either way query head h reads group h / (heads / groups), and
  // out (and dout) is [batch * q_seq, heads * head_dim] with head h at column h * head_dim.
  constexpr AttentionShape self() const {
    return {.batch = batch, .seq = q_seq, .heads = heads, .groups = groups, .head_dim = head_dim};
  }
  constexpr int64_t q_width() const { return packed ? self().qkv_width() : heads * head_dim; }
  constexpr int64_t kv_width() const { return packed ? self().qkv_width() : 2 * groups * head_dim; }
  constexpr int64_t out_width() const { return heads * head_dim; }
  constexpr int64_t query_column(int64_t head) const {
    return packed ? self().query_column(head) : head * head_dim;
  }
  constexpr int64_t key_column(int64_t group) const {
    return packed ? self().key_column(group) : 2 * group * head_dim;
  }
  constexpr int64_t value_column(int64_t group) const { return key_column(group) + head_dim; }
};

// Rotary position embedding (rotate-half convention of Megatron and Hugging Face Llama):
// within the first `rotary_dim` channels of each q and k head, channel i < rotary_dim / 2 pairs
// with i + rotary_dim / 2, rotated by angle t * base^(-2i / rotary_dim) for token position t.
// Scaled frequencies for contexts past the trained one, as transformers computes them
// (modeling_rope_utils): linear divides every frequency by `factor`; llama3 (Llama 3.1) divides
// the low frequencies (wavelength over original / low_freq_factor) by `factor`, keeps the high
// ones (wavelength under original / high_freq_factor) and blends between.
struct RotaryScaling {
  enum class Kind { None, Linear, Llama3, Yarn };
  Kind kind = Kind::None;
  double factor = 1.0;
  double original_max_positions = 8192.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0;        // yarn: the ramp between interpolated and kept frequencies
  double beta_slow = 1.0;
  bool truncate = true;           // yarn: the ramp's ends rounded outwards to whole channels
  // Multiplies the cosines and sines (YaRN's attention scaling: every score by its square).
  double attention_factor = 1.0;
  bool operator==(const RotaryScaling&) const = default;
};

struct RotaryOptions {
  int64_t rotary_dim = 0;
  double base = 10000.0;
  RotaryScaling scaling;
  // Token t of each sequence sits at position t + position_offset: the new tokens of a
  // generation step, after those already in the key/value cache.
  int64_t position_offset = 0;
};

struct AdamWStep {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: master *= 1 - lr * weight_decay
  int64_t step = 1;           // 1-based, for bias correction
  float grad_scale = 1.0f;    // gradients are multiplied by this first (unscaling, clipping)
};

// One parameter of a multi-tensor AdamW step: f32 master, gradient and moments of equal numel,
// and `value`, the model's copy of the master in its own dtype, written after the update when
// defined (undefined when the master is the value itself).
struct AdamWParam {
  Tensor master, grad, m, v, value;
  float weight_decay = 0.0f;  // replaces AdamWStep::weight_decay for this parameter
};

struct SgdStep {
  float lr = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;  // decoupled, as AdamW
  float grad_scale = 1.0f;
};

struct MemoryStats {
  int64_t allocated_bytes = 0;  // live tensors now
  int64_t peak_bytes = 0;       // most ever live at once (since the last reset_peak)
};

}  // namespace megatron::tensor
