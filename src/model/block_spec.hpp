// What one transformer block is made of (its norms, its attention cores, its MLP), chosen once per
// layer from the model's description: the block is assembled from it and forward never asks the config.
#pragma once

#include <cstdint>
#include <optional>

#include "model/kinds.hpp"
#include "model/model_config.hpp"
#include "tensor/attention_spec.hpp"

namespace megatron::model {

struct MlpSpec {
  Activation activation = Activation::Gelu;
  // Gated units (SwiGLU, GeGLU): fc1 holds the gate and the up projection.
  bool gated() const { return activation == Activation::Swiglu || activation == Activation::Geglu; }
  bool operator==(const MlpSpec&) const = default;
};

struct BlockSpec {
  NormKind norm = NormKind::LayerNorm;
  bool qk_norm = false;  // RMS norms on the self-attention's query and key heads
  tensor::AttentionSpec self_attention;
  std::optional<tensor::AttentionSpec> cross_attention;  // T5's decoder blocks
  MlpSpec mlp;
  bool operator==(const BlockSpec&) const = default;
};

// The family's rules for global layer `layer`, in one place: causal self-attention for GPT and
// T5's decoder, bidirectional with padding for BERT and T5's encoder; T5's relative positions as
// a score bias on every self-attention; rotary positions inside attention; cross-attention over
// the encoder output in T5's decoder; a key/value cache for decoder-only models.
inline BlockSpec block_spec(const ModelConfig& c, int64_t layer) {
  const bool decoder = c.is_decoder_layer(layer);
  BlockSpec spec{.norm = c.norm, .qk_norm = c.qk_norm, .mlp = {.activation = c.activation}};
  spec.self_attention = {
      .mask = c.causal || decoder ? tensor::AttentionMask::Causal : tensor::AttentionMask::Padding,
      .score_bias = c.position == PositionEmbedding::Relative,
      .rotary = c.position == PositionEmbedding::Rotary,
      .kv_cache = c.causal && !c.encoder_decoder};
  if (decoder) {
    spec.cross_attention = tensor::AttentionSpec{.mask = tensor::AttentionMask::Padding,
                                                 .cross = true};
  }
  return spec;
}

}  // namespace megatron::model
