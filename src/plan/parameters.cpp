#include "plan/parameters.hpp"

#include <algorithm>

namespace megatron::plan {
namespace {

// Products of recipe sizes; an overflow is a UserError that make_plan points at the recipe.
int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, kParameterCount); }
int64_t mul(int64_t a, int64_t b, int64_t c) { return mul(mul(a, b), c); }
int64_t add(int64_t a, int64_t b) { return checked_add(a, b, kParameterCount); }

// Split across tensor-parallel ranks (column-parallel weights and biases, vocab rows).
Count split(const ModelShape& x, int64_t n) { return {n, n / x.t}; }
// Held whole by every tensor-parallel rank (norms, row-parallel biases, position embeddings).
Count replicated(int64_t n) { return {n, n}; }

Count norm(const ModelShape& x) { return replicated(x.norm_params()); }

// Input norm + fused QKV (column-parallel) + output projection (row-parallel).
Count self_attention(const ModelShape& x) {
  const int64_t qkv = add(mul(x.a, x.d), mul(2, x.g, x.d));
  Count out = norm(x);
  out += split(x, mul(x.h, qkv));
  if (x.qkv_bias) out += split(x, qkv);
  if (x.qk_norm) out += replicated(mul(2, x.d));
  out += split(x, mul(x.a, x.d, x.h));
  if (x.bias_linear) out += replicated(x.h);
  return out;
}

// T5 decoder only: norm + query from the decoder stream + key/value from the encoder output.
Count cross_attention(const ModelShape& x) {
  Count out = norm(x);
  out += split(x, mul(x.h, x.a, x.d));
  out += split(x, mul(x.h, mul(2, x.g, x.d)));
  if (x.qkv_bias) out += split(x, add(mul(x.a, x.d), mul(2, x.g, x.d)));
  out += split(x, mul(x.a, x.d, x.h));
  if (x.bias_linear) out += replicated(x.h);
  return out;
}

// Pre-MLP norm + fc1 (column-parallel; SwiGLU's gate doubles it) + fc2 (row-parallel).
Count mlp(const ModelShape& x) {
  const int64_t fc1 = mul(x.F, x.swiglu ? 2 : 1);
  Count out = norm(x);
  out += split(x, mul(x.h, fc1));
  if (x.bias_linear) out += split(x, fc1);
  out += split(x, mul(x.F, x.h));
  if (x.bias_linear) out += replicated(x.h);
  return out;
}

Count word_embedding(const ModelShape& x) { return split(x, mul(x.V, x.h)); }

}  // namespace

Count layer_parameters(const ModelShape& x, LayerKind kind) {
  Count out = self_attention(x);
  if (kind == LayerKind::Decoder) out += cross_attention(x);
  out += mlp(x);
  return out;
}

Count embedding_parameters(const ModelShape& x) {
  Count out = word_embedding(x);
  out += replicated(mul(x.P, x.h));
  // T5 relative positions: the encoder's and the decoder's [buckets, heads] tables, each rank
  // holding its heads' columns (on the first stage, with the embedding).
  if (x.R > 0) out += split(x, mul(2, x.R, x.a));
  if (x.token_types > 0) out += replicated(mul(x.token_types, x.h));
  return out;
}

Count final_norm_parameters(const ModelShape& x) { return norm(x); }

Count output_parameters(const ModelShape& x) {
  Count out;
  if (x.C > 0) {  // a classifier replaces the LM head (BERT's after its pooler)
    if (x.pooler) out += replicated(add(mul(x.h, x.h), x.h));
    out += replicated(add(mul(x.C, x.h), x.C));
    return out;
  }
  if (!x.tied) out += word_embedding(x);  // separate output projection, V x h
  if (x.lm_head_transform) {
    out += replicated(add(mul(x.h, x.h), x.h));  // LM head dense (a plain, replicated Linear)
    out += norm(x);                              // LM head norm
  }
  if (x.output_bias) out += split(x, x.V);  // vocab-parallel
  if (x.binary_head) {
    out += replicated(add(mul(x.h, x.h), x.h));  // pooler
    out += replicated(add(mul(2, x.h), 2));      // next-sentence classifier
  }
  return out;
}

Parameters count_parameters(const ModelShape& x, std::vector<Stage>& stages) {
  Parameters out;
  const Count encoder_layer = layer_parameters(x, LayerKind::Encoder);
  const Count decoder_layer = layer_parameters(x, LayerKind::Decoder);
  const Count embedding = embedding_parameters(x);
  const Count final_norm = final_norm_parameters(x);
  const Count output = output_parameters(x);
  out.per_layer = encoder_layer.total;
  out.per_decoder_layer = x.Ld > 0 ? decoder_layer.total : 0;
  out.embedding = embedding.total;
  out.output_layer = output.total;
  const int64_t final_norms = x.arch == recipe::Arch::T5 ? 2 : 1;
  out.total = add(add(add(mul(x.L, encoder_layer.total), mul(x.Ld, decoder_layer.total)),
                      add(embedding.total, mul(final_norms, final_norm.total))),
                  output.total);

  for (Stage& stage : stages) {
    int64_t n = 0;
    for (int64_t layer : stage.layers) {
      n = add(n, (x.kind(layer) == LayerKind::Decoder ? decoder_layer : encoder_layer).per_rank);
      // T5's encoder ends with its own final norm, on the stage that runs the last encoder layer.
      if (x.arch == recipe::Arch::T5 && layer == x.L - 1) n = add(n, final_norm.per_rank);
    }
    if (stage.has_embedding) n = add(n, embedding.per_rank);
    if (stage.has_output_layer) {
      n = add(n, add(final_norm.per_rank, output.per_rank));
      // Tied embeddings across a pipeline: the last stage keeps its own copy of the word
      // embedding for the LM head (Megatron syncs the two copies' gradients by all-reduce).
      if (x.tied && x.p > 1) n = add(n, word_embedding(x).per_rank);
    }
    stage.parameters_per_rank = n;
  }
  const auto [lo, hi] = std::minmax_element(
      stages.begin(), stages.end(),
      [](const Stage& l, const Stage& r) { return l.parameters_per_rank < r.parameters_per_rank; });
  out.per_rank_min = lo->parameters_per_rank;
  out.per_rank_max = hi->parameters_per_rank;
  return out;
}

}  // namespace megatron::plan
