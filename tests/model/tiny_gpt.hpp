// Small GPT configurations and inputs for model tests: every feature the recipe can switch on
// (rotary, RMSNorm, SwiGLU, grouped-query attention, untied output, no biases) in shapes small
// enough for finite differences over every weight.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "model/language_model.hpp"
#include "tensor/host_io.hpp"

namespace megatron::test_support {

inline model::ModelConfig tiny_gpt_config() {
  return {.num_layers = 2,
          .hidden = 8,
          .heads = 2,
          .groups = 2,
          .head_dim = 4,
          .ffn = 12,
          .vocab = 11,
          .padded_vocab = 16,
          .seq_length = 5,
          .max_positions = 6,
          .hidden_dropout = 0.0,
          .attention_dropout = 0.0,
          .init_std = 0.2};
}

// Llama-shaped: rotary, RMSNorm, SwiGLU, GQA (4 heads, 2 groups), untied, no biases.
inline model::ModelConfig tiny_llama_config() {
  model::ModelConfig c = tiny_gpt_config();
  c.heads = 4;
  c.groups = 2;
  c.head_dim = 4;
  c.hidden = 12;
  c.position = model::PositionEmbedding::Rotary;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Swiglu;
  c.tie_embeddings = false;
  c.linear_bias = false;
  c.qkv_bias = false;
  return c;
}

// `c` made BERT-shaped: bidirectional attention over a padding mask, the LM head's transform and
// bias, and with the binary head also token types, the pooler and the sentence-order head.
inline model::ModelConfig as_bert(model::ModelConfig c, bool binary_head = true) {
  c.arch = model::Arch::Bert;
  c.causal = false;
  c.lm_head_transform = true;
  c.output_bias = true;
  c.binary_head = binary_head;
  c.token_types = binary_head ? 2 : 0;
  return c;
}

inline model::ModelConfig tiny_bert_config() { return as_bert(tiny_gpt_config()); }

// `c` made T5-shaped: c.num_layers encoder layers (bidirectional over a padding mask) and
// `decoder_layers` decoder layers over `decoder_seq` positions, the tied head's bias.
inline model::ModelConfig as_t5(model::ModelConfig c, int64_t decoder_layers, int64_t decoder_seq) {
  c.arch = model::Arch::T5;
  c.causal = false;
  c.encoder_decoder = true;
  c.decoder_layers = decoder_layers;
  c.decoder_seq_length = decoder_seq;
  c.output_bias = c.tie_embeddings;
  return c;
}

// batch x seq random tokens below vocab; labels the next random tokens; a mask with one zero.
// For BERT-shaped configs also token types, key lengths (the second sequence padded) and
// sentence-order targets (alternating).
inline model::Batch tiny_batch(tensor::Backend& backend, const model::ModelConfig& c,
                               int64_t batch, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, int32_t(c.vocab - 1));
  const int64_t n = batch * c.seq_length;
  // T5's labels and loss mask are the decoder's.
  const int64_t m = c.encoder_decoder ? batch * c.decoder_seq_length : n;
  std::vector<int32_t> tokens(n), labels(m), positions(n);
  std::vector<float> mask(m, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = token(rng);
    positions[i] = int32_t(i % c.seq_length);
  }
  for (int64_t i = 0; i < m; ++i) labels[i] = token(rng);
  mask[1] = 0.0f;
  model::Batch out{.batch = batch,
                   .seq = c.seq_length,
                   .tokens = tensor::from_ints(backend, tokens, {n}),
                   .labels = tensor::from_ints(backend, labels, {m}),
                   .loss_mask = tensor::from_floats(backend, mask, {m}),
                   .positions = tensor::from_ints(backend, positions, {n})};
  if (c.encoder_decoder) {
    std::vector<int32_t> decoder(m), decoder_positions(m);
    for (int64_t i = 0; i < m; ++i) {
      decoder[i] = token(rng);
      decoder_positions[i] = int32_t(i % c.decoder_seq_length);
    }
    out.decoder_seq = c.decoder_seq_length;
    out.decoder_tokens = tensor::from_ints(backend, decoder, {m});
    out.decoder_positions = tensor::from_ints(backend, decoder_positions, {m});
  }
  if (c.token_types > 0) {
    std::vector<int32_t> types(n);
    for (int64_t i = 0; i < n; ++i) types[i] = (i % c.seq_length) * 2 >= c.seq_length ? 1 : 0;
    out.token_types = tensor::from_ints(backend, types, {n});
  }
  if (!c.causal) {
    for (int64_t b = 0; b < batch; ++b) out.key_lengths.push_back(b == 1 ? c.seq_length - 2 : c.seq_length);
  }
  if (c.binary_head) {
    for (int64_t b = 0; b < batch; ++b) out.sentence_order.push_back(int32_t(b % 2));
  }
  if (c.classes > 0) {  // a class per sequence; the GPT classifier reads each one's last token
    for (int64_t b = 0; b < batch; ++b) out.sentence_order.push_back(int32_t((b + 1) % c.classes));
    if (!c.pooler) {
      for (int64_t b = 0; b < batch; ++b) out.valid_lengths.push_back(b == 1 ? c.seq_length - 3 : c.seq_length);
    }
  }
  return out;
}

}  // namespace megatron::test_support
