#include "plan/stage_work.hpp"

#include <algorithm>

#include "model/block_spec.hpp"

namespace megatron::plan {
namespace {

// Adds a linear layer's forward GEMM over `tokens` rows (in -> out features) with its two
// backward GEMMs (input gradient, weight gradient), each `passes` forwards (recompute: 2).
void linear(StageWork& w, double tokens, double in, double out, double passes) {
  w.gemms.push_back({tokens, out, in, passes});  // y = x W^T
  w.gemms.push_back({tokens, in, out, 1});       // dx = dy W
  w.gemms.push_back({out, in, tokens, 1});       // dW += dy^T x
}

// Flash attention is one fused kernel. Without it (model.flash_attention: false) the scores are
// materialised: batched GEMMs over the full square (no causal skipping), and the s x s scores
// and probabilities pass through memory: written by QK^T, softmax in and out, dropout in, out
// and its 1-byte mask, read by PV (6e + 1 bytes per score forward); backward about 8e + 1.
void attention(StageWork& w, const ModelShape& x, const AttentionWork& a) {
  if (x.flash) {
    w.attention.push_back(a);
    return;
  }
  const double e = x.e(), per_head = a.batch_heads;
  w.gemms.push_back({a.queries, a.keys, a.head_dim, per_head * a.forwards});  // Q K^T
  w.gemms.push_back({a.queries, a.head_dim, a.keys, per_head * a.forwards});  // P V
  w.gemms.push_back({a.queries, a.keys, a.head_dim, per_head});  // dP = dO V^T
  w.gemms.push_back({a.keys, a.head_dim, a.queries, per_head});  // dV = P^T dO
  w.gemms.push_back({a.queries, a.head_dim, a.keys, per_head});  // dQ = dS K
  w.gemms.push_back({a.keys, a.head_dim, a.queries, per_head});  // dK = dS^T Q
  const double scores = per_head * a.queries * a.keys;
  w.memory_bytes += scores * ((6 * e + 1) * a.forwards + (8 * e + 1));
  w.kernels += 4 * a.forwards + 6;
}

struct LayerSizes {
  double T;   // tokens of a micro-batch at this layer, per context-parallel rank
  double Ts;  // tokens the elementwise ops see (split by t under sequence parallelism)
};

}  // namespace

StageWork stage_work(const ModelShape& x, const Stage& stage) {
  StageWork w;
  const double t = static_cast<double>(x.t), c = static_cast<double>(x.c);
  const double b = static_cast<double>(x.b), h = static_cast<double>(x.h);
  const double a = static_cast<double>(x.a), g = static_cast<double>(x.g);
  const double d = static_cast<double>(x.d), F = static_cast<double>(x.F);
  const double e = x.e();
  const int64_t full_recompute =
      x.recompute == recipe::Recompute::Full
          ? std::min<int64_t>(x.recompute_layers, static_cast<int64_t>(stage.layers.size()))
          : 0;

  for (std::size_t i = 0; i < stage.layers.size(); ++i) {
    const LayerKind kind = x.kind(stage.layers[i]);
    const model::BlockSpec spec = model::block_spec(x.model, stage.layers[i]);
    const double seq = static_cast<double>(x.tokens(kind));
    const LayerSizes n{b * seq / c, x.sp ? b * seq / c / t : b * seq / c};
    const bool recomputed = static_cast<int64_t>(i) < full_recompute;
    const double passes = recomputed ? 2 : 1;
    const double attention_passes =
        passes + (x.recompute == recipe::Recompute::Selective ? 1 : 0);

    linear(w, n.T, h, (a * d + 2 * g * d) / t, passes);
    attention(w, x, {b * a / t, seq / c, seq, d,
                     spec.self_attention.mask == tensor::AttentionMask::Causal,
                     attention_passes, 1});
    linear(w, n.T, a * d / t, h, passes);
    if (spec.cross_attention) {  // over the encoder output
      const double encoder_tokens = b * static_cast<double>(x.s) / c;
      linear(w, n.T, h, a * d / t, passes);
      linear(w, encoder_tokens, h, 2 * g * d / t, passes);
      attention(w, x, {b * a / t, seq / c, static_cast<double>(x.s), d, false,
                       attention_passes, 1});
      linear(w, n.T, a * d / t, h, passes);
    }
    linear(w, n.T, h, F * (x.swiglu ? 2 : 1) / t, passes);
    linear(w, n.T, F / t, h, passes);

    // Elementwise traffic of one forward (read + write): two norms (2 each), two dropout-adds
    // (3 each) and the rest on Ts x h; the activation on T x F/t; rotary on the queries and
    // keys. A backward pass moves about twice a forward's (dy and x in, dx out).
    double forward = 10 * n.Ts * h * e + (x.swiglu ? 3 : 2) * n.T * F / t * e;
    if (spec.self_attention.rotary) forward += 2 * n.T * (a + g) * d / t * e;
    if (kind == LayerKind::Decoder) forward += 5 * n.Ts * h * e;
    w.memory_bytes += forward * (passes + 2);
    const double ops_forward = kind == LayerKind::Decoder ? 18 : 12;
    w.kernels += ops_forward * (passes + 2);
  }

  const double out_seq = static_cast<double>(x.output_tokens());
  const double out_tokens = b * out_seq / c;
  const double out_tokens_sp = x.sp ? out_tokens / t : out_tokens;
  if (stage.has_embedding) {
    w.memory_bytes += 3 * b * static_cast<double>(x.s) / c / (x.sp ? t : 1) * h * e;
    w.kernels += 4;
  }
  if (stage.has_output_layer) {
    w.memory_bytes += 5 * out_tokens_sp * h * e;  // final norm, forward and backward
    w.kernels += 3;
    if (x.C > 0) {
      linear(w, b, h, static_cast<double>(x.C), 1);
    } else {
      if (x.lm_head_transform) linear(w, out_tokens, h, h, 1);
      linear(w, out_tokens, h, static_cast<double>(x.V) / t, 1);
      // The loss reads the f32 logits once forward; backward reads them and writes their
      // gradient.
      w.memory_bytes += 3 * out_tokens * static_cast<double>(x.V) / t * 4;
      w.kernels += 6;
    }
  }

  // Per iteration: zero the gradients, their norm, then the update, over this rank's share.
  const double params = static_cast<double>(stage.parameters_per_rank);
  const double updated =
      x.distributed_optimizer ? params / static_cast<double>(x.gradient_group()) : params;
  const double update_bytes = x.optimizer == recipe::Optimizer::AdamW ? 28 : 16;
  w.optimizer_bytes = 8 * params + update_bytes * updated + (x.dtype == recipe::DType::F32 ? 0 : 2 * params);
  // Three passes (zeroing, norm, update) over about 12 parameter tensors a layer.
  w.optimizer_kernels = 3 * std::max(1.0, static_cast<double>(stage.layers.size()) * 12);
  return w;
}

}  // namespace megatron::plan
