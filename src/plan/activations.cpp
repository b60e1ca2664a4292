#include "plan/activations.hpp"

#include "plan/program.hpp"

#include <algorithm>

namespace megatron::plan {
namespace {

// Tokens of one micro-batch on this context-parallel rank.
double local_tokens(const ModelShape& x, int64_t sequence) {
  return static_cast<double>(sequence) / static_cast<double>(x.c);
}

// Fraction of an (s, b, h)-shaped tensor a rank keeps outside the tensor-parallel regions:
// all of it, or 1/t of it when sequence parallelism shards those regions along s.
double outside_share(const ModelShape& x) { return x.sp ? 1.0 / x.t : 1.0; }

double attention_block(const ModelShape& x, double q, double kv_local, double kv_full) {
  const double e = x.e(), b = x.b, h = x.h, a = x.a, d = x.d, g = x.g, t = x.t;
  const double out = outside_share(x);
  double bytes = 0;
  bytes += e * q * b * h * out;               // norm input
  bytes += e * q * b * h * out;               // QKV (or query) projection input
  bytes += e * q * b * a * d / t;             // Q
  bytes += 2 * e * kv_local * b * g * d / t;  // K and V (g groups of d channels each)
  if (x.recompute != recipe::Recompute::Selective) {
    if (x.flash) {
      bytes += 4 * a * q * b / t;  // f32 softmax statistics (logsumexp) per query and head
    } else {
      const double scores = a * q * kv_full * b / t;
      bytes += e * scores;                                     // softmax output
      if (x.attention_dropout > 0) bytes += (1 + e) * scores;  // 1-byte mask + dropout output
    }
  }
  bytes += e * q * b * a * d / t;                      // output projection input
  if (x.hidden_dropout > 0) bytes += q * b * h * out;  // 1-byte dropout mask
  return bytes;
}

double mlp_block(const ModelShape& x, double q) {
  const double e = x.e(), b = x.b, h = x.h, F = x.F, t = x.t;
  const double out = outside_share(x);
  double bytes = 0;
  bytes += e * q * b * h * out;                        // norm input
  bytes += e * q * b * h * out;                        // fc1 input
  bytes += e * q * b * F * (x.swiglu ? 2 : 1) / t;     // fc1 output (activation input)
  bytes += e * q * b * F / t;                          // fc2 input
  if (x.hidden_dropout > 0) bytes += q * b * h * out;  // 1-byte dropout mask
  return bytes;
}

// The f32 logits of one micro-batch on this rank's vocabulary shard.
double logits_bytes(const ModelShape& x) {
  return 4.0 * local_tokens(x, x.output_tokens()) * x.b * static_cast<double>(x.V) / x.t;
}

}  // namespace

double layer_activation_bytes(const ModelShape& x, LayerKind kind) {
  const double q = local_tokens(x, x.tokens(kind));
  // Self-attention: each rank keeps its own s/c keys, but scores span the whole sequence.
  double bytes = attention_block(x, q, q, static_cast<double>(x.tokens(kind)));
  // Q/K norms keep the projection's output (before them) and f32 statistics per query and key head.
  if (x.qk_norm) {
    bytes += x.e() * q * x.b * (x.a + 2.0 * x.g) * x.d / x.t + 4.0 * q * x.b * (x.a + x.g) / x.t;
  }
  if (kind == LayerKind::Decoder)
    bytes += attention_block(x, q, local_tokens(x, x.s), static_cast<double>(x.s));
  return bytes + mlp_block(x, q);
}

double recomputed_layer_activation_bytes(const ModelShape& x, LayerKind kind) {
  return x.e() * local_tokens(x, x.tokens(kind)) * x.b * x.h * outside_share(x);
}

double stage_extra_activation_bytes(const ModelShape& x, const Stage& stage) {
  const double e = x.e(), b = x.b, h = x.h, out = outside_share(x);
  double bytes = 0;
  if (stage.has_embedding && x.hidden_dropout > 0) {
    bytes += local_tokens(x, x.s) * b * h * out;  // embedding dropout mask
    // T5: the first chunk embeds the decoder's input too (its own dropout mask).
    if (x.arch == recipe::Arch::T5) bytes += local_tokens(x, x.sd) * b * h * out;
  }
  const bool holds_decoder = std::any_of(stage.layers.begin(), stage.layers.end(), [&](int64_t l) {
    return x.kind(l) == LayerKind::Decoder;
  });
  if (holds_decoder) {
    // T5: every cross-attention of a stage reads one shared copy of the encoder output.
    bytes += e * local_tokens(x, x.s) * b * h * out;
  }
  if (stage.has_output_layer) {
    const double q = local_tokens(x, x.output_tokens());
    bytes += e * q * b * h * out;  // final norm input
    if (x.C == 0) {
      // The output layer's input, every row of the sequence (its weight gradient reads it), or
      // fused, the gradient of that input, computed in the forward.
      bytes += e * q * b * h;
      if (!x.model.fused_classifier) bytes += logits_bytes(x);  // for the cross-entropy's backward
    }
  }
  return bytes;
}

double stage_transient_activation_bytes(const ModelShape& x, const Stage& stage) {
  if (!stage.has_output_layer || x.C > 0 || !x.model.fused_classifier) return 0;
  const double rows = local_tokens(x, x.output_tokens()) * x.b;
  const double columns = static_cast<double>(x.V) / x.t;
  const auto chunk = model::classifier_chunk_rows(x.model, static_cast<int64_t>(rows),
                                                  static_cast<int64_t>(columns));
  return 4.0 * static_cast<double>(chunk) * columns;
}

double stage_activation_bytes(const ModelShape& x, const Stage& stage) {
  // Megatron's uniform full recompute checkpoints the first N layers and keeps the rest.
  const int64_t recomputed =
      x.recompute == recipe::Recompute::Full
          ? std::min<int64_t>(x.recompute_layers, static_cast<int64_t>(stage.layers.size()))
          : 0;
  double bytes = stage_extra_activation_bytes(x, stage);
  for (std::size_t i = 0; i < stage.layers.size(); ++i) {
    const LayerKind kind = x.kind(stage.layers[i]);
    bytes += static_cast<int64_t>(i) < recomputed ? recomputed_layer_activation_bytes(x, kind)
                                                  : layer_activation_bytes(x, kind);
  }
  return bytes;
}

double microbatches_in_flight(const ModelShape& x, int64_t stage) {
  // Chunks alive at the peak of the stage's program; v chunks make one stage's worth.
  return static_cast<double>(peak_chunks_in_flight(x.schedule, x.p, stage, x.v, x.m)) /
         static_cast<double>(x.v);
}

}  // namespace megatron::plan
