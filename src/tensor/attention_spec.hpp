// What an attention core computes (its mask, a score bias, rotary positions, where keys and values
// come from, a key/value cache) and the backend's answer for it on a device: which op runs it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/attention_head_dims.hpp"
#include "tensor/dtype.hpp"

namespace megatron::tensor {

enum class AttentionMask : uint8_t {
  Causal,   // each query sees the keys at or before its own position
  Padding,  // every key of its sequence but the padding (the batch's key lengths)
};

// One layer's attention, named once when the model is assembled (model::block_spec) so that
// forward never asks the config which attention it runs.
struct AttentionSpec {
  AttentionMask mask = AttentionMask::Causal;
  bool score_bias = false;  // a per-head bias on the scores, given by the batch, with its gradient
  bool rotary = false;      // rotary positions on queries and keys before the core
  bool cross = false;       // queries from the block's stream, keys and values from the encoder's
  bool kv_cache = false;    // generation runs it a step at a time over a key/value cache
  bool operator==(const AttentionSpec&) const = default;
};

// The Backend's two attention ops. Flash: attention_forward / attention_backward over the fused
// qkv, an online softmax that keeps nothing of seq x seq. Scores: cross_attention_forward /
// backward, queries apart from (or packed with) keys and values, with a score bias and its
// gradient.
enum class AttentionKernel : uint8_t { Flash, Scores };

constexpr AttentionKernel attention_kernel(const AttentionSpec& spec) {
  return spec.score_bias || spec.cross ? AttentionKernel::Scores : AttentionKernel::Flash;
}

struct AttentionSupport {
  AttentionKernel kernel = AttentionKernel::Flash;
  std::string implementation;  // what runs it on the device, as `megatron plan` prints it
  std::string refusal;         // not empty: the device cannot run it, and what would
};

// What the backend of `device` runs `spec` with, for heads of `head_dim` channels stored in
// `dtype`; without building a backend, so that the planner can record it and refuse before a run.
inline AttentionSupport attention_support(Device device, const AttentionSpec& spec,
                                          int64_t head_dim, DType dtype) {
  AttentionSupport s;
  s.kernel = attention_kernel(spec);
  const bool flash = s.kernel == AttentionKernel::Flash;
  if (device == Device::Cpu) {
    s.implementation = flash ? "cpu flash attention" : "cpu attention over each head's score rows";
  } else {
    // The CUDA backend hands bf16/f16 to cuDNN wherever cuDNN builds the graph for the shape
    // (MEGATRON_CUDNN_ATTENTION=0 turns it off), else to kernels/.
    const std::string own = flash ? "the flash kernel" : "the score-bias kernel";
    s.implementation = dtype == DType::F32 ? "cuda: " + own
                                           : "cuda: cuDNN fused attention, else " + own;
    constexpr int64_t kWidest = kCudaAttentionHeadDims.back();
    if (head_dim > kWidest) {
      s.refusal = "attention heads of " + std::to_string(head_dim) +
                  " channels are wider than the CUDA attention's " + std::to_string(kWidest);
    }
  }
  if (spec.kv_cache) s.implementation += "; generation: cached attention";
  return s;
}

}  // namespace megatron::tensor
