#include "plan/flops.hpp"

#include <algorithm>

namespace megatron::plan {
namespace {

// Query-side projections and MLP over `q` tokens per sequence.
double attention_projections(const ModelShape& x, double q, double kv, bool fused_qkv) {
  const double B = x.B, h = x.h, a = x.a, d = x.d, g = x.g;
  const double qkv = fused_qkv ? 2 * B * q * h * (a * d + 2 * g * d)
                               : 2 * B * q * h * a * d + 2 * B * kv * h * 2 * g * d;
  return qkv + 2 * B * q * a * d * h;  // + output projection
}

double attention_core(const ModelShape& x, double q, double kv) {
  return 4.0 * x.B * q * kv * x.a * x.d;  // QK^T and softmax(.)V, 2 B q kv (a d) each
}

double mlp(const ModelShape& x, double q) {
  const double B = x.B, h = x.h, F = x.F;
  return 2 * B * q * h * F * (x.swiglu ? 2 : 1) + 2 * B * q * F * h;
}

}  // namespace

double layer_forward_flops(const ModelShape& x, LayerKind kind) {
  const double q = static_cast<double>(x.tokens(kind));
  double flops = attention_projections(x, q, q, true) + attention_core(x, q, q) + mlp(x, q);
  if (kind == LayerKind::Decoder) {
    const double kv = static_cast<double>(x.s);  // cross-attention reads the encoder output
    flops += attention_projections(x, q, kv, false) + attention_core(x, q, kv);
  }
  return flops;
}

double attention_core_forward_flops(const ModelShape& x, LayerKind kind) {
  const double q = static_cast<double>(x.tokens(kind));
  double flops = attention_core(x, q, q);
  if (kind == LayerKind::Decoder) flops += attention_core(x, q, static_cast<double>(x.s));
  return flops;
}

double output_forward_flops(const ModelShape& x) {
  const double B = x.B, h = x.h, q = static_cast<double>(x.output_tokens());
  if (x.C > 0) {  // one classified token a sequence (after BERT's pooler)
    return 2 * B * h * static_cast<double>(x.C) + (x.pooler ? 2 * B * h * h : 0.0);
  }
  double flops = 2 * B * q * h * static_cast<double>(x.V);       // logits
  if (x.lm_head_transform) flops += 2 * B * q * h * h;  // LM head dense
  return flops;
}

Flops stage_flops(const ModelShape& x, const Stage& stage) {
  double forward = 0, again = 0;
  const int64_t recomputed =
      x.recompute == recipe::Recompute::Full
          ? std::min<int64_t>(x.recompute_layers, static_cast<int64_t>(stage.layers.size()))
          : 0;
  for (std::size_t i = 0; i < stage.layers.size(); ++i) {
    const LayerKind kind = x.kind(stage.layers[i]);
    const double layer = layer_forward_flops(x, kind);
    forward += layer;
    if (static_cast<int64_t>(i) < recomputed) again += layer;
    if (x.recompute == recipe::Recompute::Selective) again += attention_core_forward_flops(x, kind);
  }
  if (stage.has_output_layer) forward += output_forward_flops(x);
  // Backward costs two forwards (gradients of inputs and of weights).
  return {3 * forward, 3 * forward + again};
}

Flops count_flops(const ModelShape& x, const std::vector<Stage>& stages) {
  Flops out;
  for (const Stage& stage : stages) {
    const Flops f = stage_flops(x, stage);
    out.model_per_iteration += f.model_per_iteration;
    out.hardware_per_iteration += f.hardware_per_iteration;
  }
  return out;
}

}  // namespace megatron::plan
