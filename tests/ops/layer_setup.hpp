// How the op harness's layer cases set up the model's layers: each family's tiny configuration,
// the one place a TransformerBlock's BlockSpec is chosen, and random parameter values.
#pragma once

#include <cstdint>

#include "model/block_spec.hpp"
#include "model/model_config.hpp"
#include "model/parameter.hpp"
#include "model/transformer_block.hpp"
#include "model/tiny_gpt.hpp"

namespace megatron::ops_test {

// The spec every block of these cases is built with: the model's own choice for that layer
// (model/block_spec.hpp), so each family's block is checked as the model assembles it; the one
// place the cases name it.
inline model::BlockSpec block_spec_for(const model::ModelConfig& config, int64_t layer) {
  return model::block_spec(config, layer);
}

// GPT: the model tests' tiny GPT (LayerNorm, erf-GeLU, biases, learned positions; H 8, NH 2,
// HD 4, F 12, V 11 padded to 16, no dropout: finite differences need a deterministic forward)
// as one layer over 4 tokens, so that finite differences over a block cost milliseconds.
inline model::ModelConfig gpt_config() {
  model::ModelConfig c = test_support::tiny_gpt_config();
  c.num_layers = 1;
  c.seq_length = 4;
  return c;
}

// Llama-style: RMSNorm, SwiGLU, rotary, grouped-query attention (NH 4 over G 2), no biases.
inline model::ModelConfig llama_config() {
  model::ModelConfig c = gpt_config();
  c.heads = 4;
  c.groups = 2;
  c.position = model::PositionEmbedding::Rotary;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Swiglu;
  c.tie_embeddings = false;
  c.linear_bias = false;
  c.qkv_bias = false;
  return c;
}

// BERT: bidirectional attention over a padding mask, token types, the LM head's transform and
// bias, the binary head.
inline model::ModelConfig bert_config() {
  model::ModelConfig c = gpt_config();
  c.arch = model::Arch::Bert;
  c.causal = false;
  c.token_types = 2;
  c.lm_head_transform = true;
  c.output_bias = true;
  c.binary_head = true;
  return c;
}

// T5 (v1.1-style blocks): one encoder layer (0) and one decoder layer (1), relative position
// buckets, RMSNorm and the tanh-GeGLU; the decoder's memory has its own length (5).
inline model::ModelConfig t5_config() {
  model::ModelConfig c = gpt_config();
  c.arch = model::Arch::T5;
  c.causal = false;
  c.encoder_decoder = true;
  c.decoder_layers = 1;
  c.decoder_seq_length = 4;
  c.seq_length = 5;
  c.position = model::PositionEmbedding::Relative;
  c.relative_buckets = 8;
  c.relative_max_distance = 16;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Geglu;
  c.linear_bias = false;
  c.qkv_bias = false;
  return c;
}

// Every parameter drawn on the host from `seed`, so each backend holds the same values: weights
// and biases N(0, 0.3^2), norm weights 1 + N(0, 0.2^2). Biases are not zero, so a bias left out
// of a forward or its gradient shows.
void randomise_parameters(tensor::Backend& backend, const model::ParameterSet& params,
                          uint32_t seed);

}  // namespace megatron::ops_test
