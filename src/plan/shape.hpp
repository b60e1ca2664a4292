// The model and layout as the cost model sees them: every glossary size (B, b, s, h, a, g, d,
// F, V, L, t, p, v, c, D, m, e) resolved once from a compiled recipe, so formulas read like
// docs/plan.md.
#pragma once

#include <cstdint>

#include "model/model_config.hpp"
#include "plan/placement.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

// What a global transformer layer index is: GPT and BERT have only self-attention layers;
// T5 numbers its encoder layers first (0..L-1), then its decoder layers (L..L+Ld-1).
enum class LayerKind { Encoder, Decoder };

struct ModelShape {
  recipe::Arch arch = recipe::Arch::Gpt;
  // The model as every rank builds it (plan::model_config): the family's rules are read from it
  // (and each layer's make from model::block_spec of it), never written again here.
  model::ModelConfig model;
  // Sizes (docs/plan.md, glossary).
  int64_t B = 1;   // global batch (sequences per iteration)
  int64_t b = 1;   // micro batch
  int64_t s = 1;   // sequence length (T5: encoder)
  int64_t sd = 0;  // T5 decoder sequence length, else 0
  int64_t h = 1;   // hidden
  int64_t a = 1;   // attention heads
  int64_t g = 1;   // query groups (key/value heads)
  int64_t d = 1;   // head dim
  int64_t F = 4;   // ffn hidden
  int64_t V = 1;   // padded vocab
  int64_t C = 0;   // classification fine-tuning: classes (a classifier replaces the LM head)
  int64_t P = 0;   // learned position embeddings (rows), 0 with rotary
  int64_t R = 0;   // T5 relative positions: buckets of each stack's [R, a] bias table, else 0
  int64_t L = 1;   // layers (T5: encoder layers)
  int64_t Ld = 0;  // T5 decoder layers, else 0
  // Layout.
  int64_t t = 1, p = 1, v = 1, c = 1, D = 1;
  int64_t m = 1;  // micro-batches per iteration per DP rank
  int64_t world = 1;
  int64_t gpus_per_node = 1;
  recipe::Schedule schedule = recipe::Schedule::OneFOneB;
  // Layer structure.
  bool swiglu = false;
  bool layernorm = true;    // LayerNorm (weight + bias) or RMSNorm (weight only)
  bool bias_linear = true;  // projection and MLP biases
  bool qkv_bias = true;
  bool qk_norm = false;     // q/k norms: two [d] weights per layer
  bool tied = true;         // output layer shares the word embedding
  bool binary_head = true;  // BERT pooler + next-sentence head (not under a classifier)
  int64_t token_types = 0;  // rows of the token-type embedding
  bool lm_head_transform = false;  // BERT's dense + norm before the output layer
  bool output_bias = false;        // a vocab-parallel bias on the logits
  bool pooler = false;             // a classifier reads token 0 through BERT's pooler
  bool flash = true;        // attention core keeps no s x s matrices
  double hidden_dropout = 0;
  double attention_dropout = 0;
  // Parallelism and training choices that change memory.
  bool sp = false;  // sequence parallel
  bool distributed_optimizer = false;
  recipe::Recompute recompute = recipe::Recompute::None;
  int64_t recompute_layers = 0;  // per stage, full recompute only
  recipe::DType dtype = recipe::DType::F32;
  recipe::Optimizer optimizer = recipe::Optimizer::AdamW;
  double sgd_momentum = 0;

  int64_t total_layers() const { return L + Ld; }
  LayerKind kind(int64_t layer) const {
    return layer < L ? LayerKind::Encoder : LayerKind::Decoder;
  }
  // e: bytes of one activation element (16-bit activations under bf16/f16).
  double e() const { return dtype == recipe::DType::F32 ? 4.0 : 2.0; }
  // Tokens a layer of this kind processes per sequence (T5 decoder: the decoder length).
  int64_t tokens(LayerKind k) const { return k == LayerKind::Decoder ? sd : s; }
  // Sequence length of the output layer (logits).
  int64_t output_tokens() const { return arch == recipe::Arch::T5 ? sd : s; }
  // Ranks that hold the same weights and average gradients: Megatron reduces over data x context.
  int64_t gradient_group() const { return D * c; }
  int64_t norm_params() const { return layernorm ? 2 * h : h; }
};

ModelShape shape_of(const recipe::CompiledRecipe& compiled, const Placement& placement);

}  // namespace megatron::plan
