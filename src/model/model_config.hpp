// The shape and behaviour of a model of any family (GPT, Llama-style, BERT), taken from a
// compiled recipe by plan::model_config: what the layers and heads need and nothing about how
// training runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/kinds.hpp"
#include "tensor/dtype.hpp"

namespace megatron::model {

struct ModelConfig {
  Arch arch = Arch::Gpt;
  int64_t num_layers = 0;      // T5: the encoder's
  int64_t decoder_layers = 0;  // T5: the decoder's, numbered num_layers.. after the encoder's
  int64_t decoder_seq_length = 0;  // T5
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t groups = 0;  // key/value heads
  int64_t head_dim = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;         // the tokenizer's
  int64_t padded_vocab = 0;  // rows of the embedding and output layer
  int64_t seq_length = 0;
  int64_t max_positions = 0;
  PositionEmbedding position = PositionEmbedding::Learned;
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;
  // RoPE scaling (recipe model.rope_scaling and its keys): the factor and, for llama3, the
  // trained context and the wavelength bounds of the blend.
  RopeScaling rope_scaling = RopeScaling::None;
  double rope_scaling_factor = 1.0;
  int64_t rope_original_max_positions = 8192;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  // yarn: the ramp's bounds in rotations, whether its ends are whole channels, and the factor on
  // the cosines and sines.
  double rope_beta_fast = 32.0;
  double rope_beta_slow = 1.0;
  bool rope_truncate = true;
  double rope_attention_factor = 1.0;
  // Mistral's sliding-window attention: each token sees the last `sliding_window` positions
  // (0: all). The engine computes full attention, which is the same function for sequences up
  // to the window, so longer ones are refused (longest_sequence).
  int64_t sliding_window = 0;
  int64_t relative_buckets = 32;        // T5 relative positions
  int64_t relative_max_distance = 128;
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  Activation activation = Activation::Gelu;
  bool tie_embeddings = true;
  bool linear_bias = true;
  bool qkv_bias = true;
  // RMS norms on each query and key head before the rotation (Qwen3's q_norm/k_norm, Megatron's
  // --qk-layernorm): two head_dim weights per layer.
  bool qk_norm = false;
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  double init_std = 0.02;
  tensor::DType dtype = tensor::DType::F32;
  Recompute recompute = Recompute::None;
  int64_t recompute_layers = 0;  // full recompute: the first N blocks
  // The LM head's output layer and cross-entropy run in chunks of rows during a training forward
  // that knows its loss gradient (Pass::loss_grad_numerator), computing their gradients there:
  // a micro-batch's f32 logits are never whole (llm.c's fused classifier).
  bool fused_classifier = true;
  // Bytes of f32 logits per chunk, and the fewest rows a chunk has even when that is more bytes:
  // narrower GEMMs run well below their rate (measured with --profile on the CPU: 166-row chunks
  // of GPT-2's vocabulary cost 12% of a gpt-tiny step, 512-row ones nothing measurable). Fixed,
  // so that results never depend on the machine; tests make both small, so that a tiny batch
  // spans several chunks.
  int64_t classifier_chunk_bytes = int64_t{32} << 20;
  int64_t classifier_chunk_min_rows = 512;
  // What the family changes; set from `arch` by model_config, spelled out so that the layers
  // read what they do rather than which family they are in.
  bool causal = true;          // attention mask: causal (GPT) or bidirectional with padding (BERT)
  // T5: an encoder (bidirectional, padding mask, its own final norm) and a decoder of
  // `decoder_layers` (causal self-attention, then cross-attention over the encoder output).
  bool encoder_decoder = false;
  int64_t token_types = 0;     // rows of the token-type (segment) embedding; 0: none
  bool lm_head_transform = false;  // dense, GeLU, LayerNorm before the output layer (BERT)
  bool output_bias = false;        // a vocab-parallel bias on the logits (BERT)
  bool binary_head = false;        // pooler (dense + tanh on token 0) and a 2-way classifier
  // Classification fine-tuning: a `classes`-way classifier on each sequence (after the pooler on
  // token 0 with `pooler`, else on its last token) replaces the language-model and binary heads.
  int64_t classes = 0;
  bool pooler = false;

  int64_t rotary_dim() const;
  // The longest sequence the model computes as specified: its positions, or its window.
  int64_t longest_sequence() const {
    return sliding_window > 0 ? std::min(max_positions, sliding_window) : max_positions;
  }
  int64_t total_layers() const { return num_layers + decoder_layers; }
  // T5: whether global layer `layer` is one of the decoder's.
  bool is_decoder_layer(int64_t layer) const { return encoder_decoder && layer >= num_layers; }
};


// YaRN's attention factor from its scaling factor alone (transformers' yarn_get_mscale):
// 0.1 ln(factor) + 1, and 1 for a factor of at most 1.
inline double yarn_attention_factor(double factor, double mscale = 1.0) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// Rows per chunk of the fused classifier over `rows` rows of a `columns`-wide vocabulary shard:
// within the byte budget (or the minimum rows), then evened out over the chunks that makes, so
// that no chunk is a small remainder. Shared by the head and the plan's memory figure.
inline int64_t classifier_chunk_rows(const ModelConfig& c, int64_t rows, int64_t columns) {
  if (rows <= 0) return 1;
  const int64_t by_bytes = c.classifier_chunk_bytes / (4 * std::max<int64_t>(columns, 1));
  const int64_t most = std::clamp<int64_t>(std::max(by_bytes, c.classifier_chunk_min_rows), 1, rows);
  const int64_t chunks = (rows + most - 1) / most;
  return (rows + chunks - 1) / chunks;
}

}  // namespace megatron::model
