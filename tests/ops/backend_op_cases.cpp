// The op harness's cases for the Backend's ops with a backward: one case per op and mode (mask,
// layout, fused or not), on tiny f32 shapes. Shapes use the glossary: B batch, S sequence, NH
// heads, G key/value groups, HD head dim, F ffn, V vocabulary.
#include <cmath>
#include <memory>
#include <vector>

#include "ops/op_case.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {
namespace {

using tensor::AttentionOptions;
using tensor::AttentionShape;
using tensor::Backend;
using tensor::CrossAttentionShape;
using tensor::DType;
using tensor::RngKey;
using tensor::Shape;
using tensor::Tensor;

// Why the default Tolerance holds for these ops: central differences in f32 with a step of 1e-2
// on inputs of scale 1. The outputs round at ~6e-8 relative, which the division by twice the step
// turns into ~1e-5 of noise (hence fd_atol 1e-4); the curvature error is O(step^2) relative. Both
// stay below 2e-3 of the largest gradient element, while a missing term, a wrong mask or a
// gradient scaled by 1% exceeds it. CUDA: f32 results differ from the CPU's only in summation
// order, fused multiply-adds and exp's last bits: 1e-5 of the largest value (cuda_harness.hpp).
constexpr std::string_view kOpWhy =
    "f32 central differences, step 1e-2: ~1e-5 rounding noise, O(step^2) curvature";

Tensor zeros_like(Backend& b, const Tensor& x) { return b.zeros(x.shape(), x.dtype()); }
Tensor empty_like(Backend& b, const Tensor& x) { return b.empty(x.shape(), x.dtype()); }
Tensor copy_of(Backend& b, const Tensor& x) {
  Tensor y = empty_like(b, x);
  b.copy(x, y);
  return y;
}
// Values center + N(0, spread^2): norm weights near 1, so a wrong sign or factor shows.
Tensor around(Backend& b, const Shape& shape, uint32_t seed, float center, float spread) {
  std::vector<float> v = normal_values(size_t(tensor::numel(shape)), seed, spread);
  for (float& x : v) x += center;
  return tensor::from_floats(b, v, shape);
}
Tensor ids(Backend& b, int64_t n, int32_t below, uint32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7 + seed) % uint32_t(below));
  return tensor::from_ints(b, v, {n});
}

OpCase op(std::string name, std::string what, decltype(OpCase::make) make,
          Tolerance tolerance = {.why = kOpWhy}) {
  return {std::move(name), std::move(what), tolerance, std::move(make)};
}

// --- GEMM -------------------------------------------------------------------------------------

OpCase gemm_case() {
  return op("gemm", "c [5B, 6] = a [5B, 7] @ b [6, 7]^T", [](Backend& be, uint32_t seed, int64_t s) {
    Tensor a = random_tensor(be, {5 * s, 7}, seed), b = random_tensor(be, {6, 7}, seed + 1);
    OpRun run{.inputs = {{"a", a}, {"b", b}}};
    run.forward = [&be, a, b] {
      Tensor c = be.empty({a.dim(0), b.dim(0)}, DType::F32);
      be.gemm(a, false, b, true, c);
      return std::vector<Tensor>{c};
    };
    run.backward = [&be, a, b](std::span<const Tensor> w) {
      Tensor da = empty_like(be, a), db = empty_like(be, b);
      be.gemm(w[0], false, b, false, da);  // dc @ b
      be.gemm(w[0], true, a, false, db);   // dc^T @ a
      return std::vector<Tensor>{da, db};
    };
    return forward_first(std::move(run));
  });
}

OpCase gemm_batched_case() {
  return op("gemm_batched", "c [2B, 3, 5] = a [2B, 4, 3]^T @ b [2B, 4, 5], per matrix",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor a = random_tensor(be, {2 * s, 4, 3}, seed), b = random_tensor(be, {2 * s, 4, 5}, seed + 1);
    OpRun run{.inputs = {{"a", a}, {"b", b}}};
    run.forward = [&be, a, b] {
      Tensor c = be.empty({a.dim(0), 3, 5}, DType::F32);
      be.gemm_batched(a, true, b, false, c);
      return std::vector<Tensor>{c};
    };
    run.backward = [&be, a, b](std::span<const Tensor> w) {
      Tensor da = empty_like(be, a), db = empty_like(be, b);
      be.gemm_batched(b, false, w[0], true, da);  // (a^T b)' wrt a: b @ dc^T
      be.gemm_batched(a, false, w[0], false, db);  // a @ dc
      return std::vector<Tensor>{da, db};
    };
    return forward_first(std::move(run));
  });
}

OpCase gemm_bias_case() {
  return op("gemm_bias", "y [5B, 6] = x [5B, 7] @ w [6, 7]^T + bias [6]; bias_grad",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 7}, seed), wt = random_tensor(be, {6, 7}, seed + 1),
           bias = random_tensor(be, {6}, seed + 2);
    OpRun run{.inputs = {{"x", x}, {"weight", wt}, {"bias", bias}}};
    run.forward = [&be, x, wt, bias] {
      Tensor y = be.empty({x.dim(0), wt.dim(0)}, DType::F32);
      be.gemm_bias(x, false, wt, true, bias, y);
      return std::vector<Tensor>{y};
    };
    run.backward = [&be, x, wt, bias](std::span<const Tensor> w) {
      Tensor dx = empty_like(be, x), dw = empty_like(be, wt), db = zeros_like(be, bias);
      be.gemm(w[0], false, wt, false, dx);
      be.gemm(w[0], true, x, false, dw);
      be.bias_grad(w[0], db);
      return std::vector<Tensor>{dx, dw, db};
    };
    return forward_first(std::move(run));
  });
}

// An MLP's two layers around the fused tanh-GeLU: gemm_bias_gelu forward, gemm_dgelu_bgrad back.
OpCase mlp_gelu_fused_case() {
  return op("gemm_bias_gelu_mlp",
            "y [5B, 4] = gelu_tanh(x [5B, 6] @ w1 [8, 6]^T + b1 [8]) @ w2 [4, 8]^T, fused GEMMs",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 6}, seed), w1 = random_tensor(be, {8, 6}, seed + 1, 0.5f),
           b1 = random_tensor(be, {8}, seed + 2), w2 = random_tensor(be, {4, 8}, seed + 3);
    OpRun run{.inputs = {{"x", x}, {"w1", w1}, {"b1", b1}, {"w2", w2}}};
    auto forward = [&be, x, w1, b1, w2](Tensor& pre, Tensor& act) {
      pre = be.empty({x.dim(0), 8}, DType::F32);
      act = be.empty({x.dim(0), 8}, DType::F32);
      be.gemm_bias_gelu(x, false, w1, true, b1, pre, act);
      Tensor y = be.empty({x.dim(0), 4}, DType::F32);
      be.gemm(act, false, w2, true, y);
      return y;
    };
    run.forward = [forward] {
      Tensor pre, act;
      return std::vector<Tensor>{forward(pre, act)};
    };
    run.backward = [&be, forward, x, w1, b1, w2](std::span<const Tensor> w) {
      Tensor pre, act;
      forward(pre, act);
      Tensor dw2 = empty_like(be, w2), dpre = empty_like(be, pre), db1 = zeros_like(be, b1);
      be.gemm(w[0], true, act, false, dw2);
      be.gemm_dgelu_bgrad(w[0], false, w2, false, pre, dpre, &db1);
      Tensor dx = empty_like(be, x), dw1 = empty_like(be, w1);
      be.gemm(dpre, false, w1, false, dx);
      be.gemm(dpre, true, x, false, dw1);
      return std::vector<Tensor>{dx, dw1, db1, dw2};
    };
    return run;
  });
}

// --- activations ------------------------------------------------------------------------------

enum class Act { GeluTanh, GeluErf, Swiglu, Geglu };

OpCase activation_case(std::string name, Act act) {
  const bool gated = act == Act::Swiglu || act == Act::Geglu;
  std::string what = name + (gated ? ": y [5B, 4] of x [5B, 8] = [gate | up]" : ": y = f(x) [5B, 6]");
  return op(std::move(name), std::move(what), [act, gated](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, gated ? 8 : 6}, seed, 1.5f);
    OpRun run{.inputs = {{"x", x}}};
    run.forward = [&be, act, gated, x] {
      Tensor y = be.empty({x.dim(0), gated ? 4 : 6}, DType::F32);
      switch (act) {
        case Act::GeluTanh: be.gelu_forward(x, y, true); break;
        case Act::GeluErf: be.gelu_forward(x, y, false); break;
        case Act::Swiglu: be.swiglu_forward(x, y); break;
        case Act::Geglu: be.geglu_forward(x, y); break;
      }
      return std::vector<Tensor>{y};
    };
    run.backward = [&be, act, x](std::span<const Tensor> w) {
      Tensor dx = empty_like(be, x);
      switch (act) {
        case Act::GeluTanh: be.gelu_backward(w[0], x, dx, true); break;
        case Act::GeluErf: be.gelu_backward(w[0], x, dx, false); break;
        case Act::Swiglu: be.swiglu_backward(w[0], x, dx); break;
        case Act::Geglu: be.geglu_backward(w[0], x, dx); break;
      }
      return std::vector<Tensor>{dx};
    };
    return forward_first(std::move(run));
  });
}

// --- dropout: a fixed key, so every forward of the finite differences draws the same mask ------

constexpr float kDropout = 0.3f;
constexpr RngKey kDropoutKey{.seed = 17, .stream = 5, .offset = 3};

OpCase dropout_case() {
  return op("dropout", "y [5B, 8] = dropout(x), p 0.3, a fixed key",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 8}, seed);
    OpRun run{.inputs = {{"x", x}}};
    run.forward = [&be, x] {
      Tensor y = empty_like(be, x);
      be.dropout_forward(x, y, kDropout, kDropoutKey);
      return std::vector<Tensor>{y};
    };
    run.backward = [&be, x](std::span<const Tensor> w) {
      Tensor dx = empty_like(be, x);
      be.dropout_backward(w[0], dx, kDropout, kDropoutKey);
      return std::vector<Tensor>{dx};
    };
    return forward_first(std::move(run));
  });
}

OpCase dropout_add_case() {
  return op("dropout_add", "out [5B, 8] = residual + dropout(x), p 0.3, a fixed key",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 8}, seed), r = random_tensor(be, {5 * s, 8}, seed + 1);
    OpRun run{.inputs = {{"x", x}, {"residual", r}}};
    run.forward = [&be, x, r] {
      Tensor out = empty_like(be, x);
      be.dropout_add(x, r, out, kDropout, kDropoutKey);
      return std::vector<Tensor>{out};
    };
    run.backward = [&be, x](std::span<const Tensor> w) {
      Tensor dx = empty_like(be, x);
      be.dropout_backward(w[0], dx, kDropout, kDropoutKey);
      return std::vector<Tensor>{dx, copy_of(be, w[0])};
    };
    return forward_first(std::move(run));
  });
}

OpCase bias_dropout_add_case() {
  return op("bias_dropout_add", "out [5B, 8] = residual + dropout(x + bias [8]), p 0.3",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 8}, seed), bias = random_tensor(be, {8}, seed + 1),
           r = random_tensor(be, {5 * s, 8}, seed + 2);
    OpRun run{.inputs = {{"x", x}, {"bias", bias}, {"residual", r}}};
    run.forward = [&be, x, bias, r] {
      Tensor scratch = copy_of(be, x);  // the op may overwrite its x
      Tensor out = empty_like(be, x);
      be.bias_dropout_add(scratch, bias, r, out, kDropout, kDropoutKey);
      return std::vector<Tensor>{out};
    };
    run.backward = [&be, x, bias](std::span<const Tensor> w) {
      Tensor dx = empty_like(be, x), dbias = zeros_like(be, bias);
      be.dropout_backward(w[0], dx, kDropout, kDropoutKey);
      be.bias_grad(dx, dbias);
      return std::vector<Tensor>{dx, dbias, copy_of(be, w[0])};
    };
    return forward_first(std::move(run));
  });
}

// --- normalisation ----------------------------------------------------------------------------

OpCase layer_norm_case() {
  return op("layer_norm", "y [5B, 8] = layer_norm(x) * gamma + beta, eps 1e-5",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 8}, seed), gamma = around(be, {8}, seed + 1, 1.0f, 0.3f),
           beta = random_tensor(be, {8}, seed + 2);
    OpRun run{.inputs = {{"x", x}, {"gamma", gamma}, {"beta", beta}}};
    auto forward = [&be, x, gamma, beta](Tensor& mean, Tensor& rstd) {
      Tensor y = empty_like(be, x);
      mean = be.empty({x.dim(0)}, DType::F32);
      rstd = be.empty({x.dim(0)}, DType::F32);
      be.layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
      return y;
    };
    run.forward = [forward] {
      Tensor mean, rstd;
      return std::vector<Tensor>{forward(mean, rstd)};
    };
    run.backward = [&be, forward, x, gamma, beta](std::span<const Tensor> w) {
      Tensor mean, rstd;
      forward(mean, rstd);
      Tensor dx = empty_like(be, x), dgamma = zeros_like(be, gamma), dbeta = zeros_like(be, beta);
      be.layer_norm_backward(w[0], x, gamma, mean, rstd, dx, dgamma, dbeta);
      return std::vector<Tensor>{dx, dgamma, dbeta};
    };
    return run;
  });
}

OpCase rms_norm_case() {
  return op("rms_norm", "y [5B, 8] = x * rsqrt(mean(x^2) + eps) * gamma, eps 1e-5",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor x = random_tensor(be, {5 * s, 8}, seed), gamma = around(be, {8}, seed + 1, 1.0f, 0.3f);
    OpRun run{.inputs = {{"x", x}, {"gamma", gamma}}};
    auto forward = [&be, x, gamma](Tensor& rstd) {
      Tensor y = empty_like(be, x);
      rstd = be.empty({x.dim(0)}, DType::F32);
      be.rms_norm_forward(x, gamma, 1e-5f, y, rstd);
      return y;
    };
    run.forward = [forward] {
      Tensor rstd;
      return std::vector<Tensor>{forward(rstd)};
    };
    run.backward = [&be, forward, x, gamma](std::span<const Tensor> w) {
      Tensor rstd;
      forward(rstd);
      Tensor dx = empty_like(be, x), dgamma = zeros_like(be, gamma);
      be.rms_norm_backward(w[0], x, gamma, rstd, dx, dgamma);
      return std::vector<Tensor>{dx, dgamma};
    };
    return run;
  });
}

// Two groups of two query heads: every slot kind (query, key, value) twice per row, head_dim 6
// (not a multiple of 8: the CUDA kernels' partial slots).
OpCase qk_norm_case() {
  return op("qk_norm", "qkv [3B, (NH + 2G) * HD] with its query and key heads RMS-normed; NH 4, G 2, HD 6",
            [](Backend& be, uint32_t seed, int64_t s) {
    const AttentionShape shape{.batch = 3 * s, .seq = 1, .heads = 4, .groups = 2, .head_dim = 6};
    Tensor qkv = random_tensor(be, {shape.batch, shape.qkv_width()}, seed);
    Tensor q_gamma = around(be, {6}, seed + 1, 1.0f, 0.3f), k_gamma = around(be, {6}, seed + 2, 1.0f, 0.3f);
    OpRun run{.inputs = {{"qkv", qkv}, {"q_gamma", q_gamma}, {"k_gamma", k_gamma}}};
    auto forward = [&be, qkv, shape, q_gamma, k_gamma](Tensor& rstd) {
      Tensor y = empty_like(be, qkv);
      rstd = be.empty({shape.batch * (shape.heads + shape.groups)}, DType::F32);
      be.qk_norm_forward(qkv, shape, q_gamma, k_gamma, 1e-5f, y, rstd);
      return y;
    };
    run.forward = [forward] {
      Tensor rstd;
      return std::vector<Tensor>{forward(rstd)};
    };
    run.backward = [&be, forward, qkv, shape, q_gamma, k_gamma](std::span<const Tensor> w) {
      Tensor rstd;
      forward(rstd);
      Tensor dqkv = empty_like(be, qkv), dq = zeros_like(be, q_gamma), dk = zeros_like(be, k_gamma);
      be.qk_norm_backward(w[0], qkv, shape, q_gamma, k_gamma, rstd, dqkv, dq, dk);
      return std::vector<Tensor>{dqkv, dq, dk};
    };
    return run;
  });
}

// --- embeddings -------------------------------------------------------------------------------

OpCase embedding_case() {
  return op("embedding", "out [6B, 4] = table [10, 4][ids], ids repeated (the backward sums)",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor table = random_tensor(be, {10, 4}, seed);
    Tensor id = ids(be, 6 * s, 4, seed);  // ids below 4: every row repeats
    OpRun run{.inputs = {{"table", table}}};
    run.forward = [&be, table, id] {
      Tensor out = be.empty({id.numel(), 4}, DType::F32);
      be.embedding_forward(id, table, out);
      return std::vector<Tensor>{out};
    };
    run.backward = [&be, table, id](std::span<const Tensor> w) {
      Tensor dtable = zeros_like(be, table);
      be.embedding_backward(id, w[0], dtable);
      return std::vector<Tensor>{dtable};
    };
    return forward_first(std::move(run));
  });
}

// A vocabulary shard (rows 3..7 of 10) added onto what out holds, as the position and token-type
// tables are: ids outside the shard give nothing.
OpCase embedding_shard_case() {
  return op("embedding_shard_accumulate",
            "out [8B, 4] = base + shard [5, 4][ids - 3], ids 0..9, zeros outside the shard",
            [](Backend& be, uint32_t seed, int64_t s) {
    Tensor table = random_tensor(be, {5, 4}, seed), base = random_tensor(be, {8 * s, 4}, seed + 1);
    Tensor id = ids(be, 8 * s, 10, seed);
    OpRun run{.inputs = {{"shard", table}, {"base", base}}};
    run.forward = [&be, table, base, id] {
      Tensor out = copy_of(be, base);
      be.embedding_forward(id, table, out, 3, true);
      return std::vector<Tensor>{out};
    };
    run.backward = [&be, table, id](std::span<const Tensor> w) {
      Tensor dtable = zeros_like(be, table);
      be.embedding_backward(id, w[0], dtable, 3);
      return std::vector<Tensor>{dtable, copy_of(be, w[0])};
    };
    return forward_first(std::move(run));
  });
}

// --- attention --------------------------------------------------------------------------------

// Partial rotary (4 of each head's 6 channels) at positions 2.. (position_offset 2): the rotation
// is linear, so its backward is the inverse rotation of the output gradient.
OpCase rotary_case() {
  return op("rotary", "qkv [B*S, (NH + 2G) * HD] rotated in place; B 2, S 3, NH 2, G 1, HD 6, dim 4",
            [](Backend& be, uint32_t seed, int64_t s) {
    const AttentionShape shape{.batch = 2 * s, .seq = 3, .heads = 2, .groups = 1, .head_dim = 6};
    const tensor::RotaryOptions options{.rotary_dim = 4, .base = 10000.0, .position_offset = 2};
    Tensor qkv = random_tensor(be, {shape.batch * shape.seq, shape.qkv_width()}, seed);
    OpRun run{.inputs = {{"qkv", qkv}}};
    run.forward = [&be, qkv, shape, options] {
      Tensor y = copy_of(be, qkv);
      be.rotary(y, shape, options, false);
      return std::vector<Tensor>{y};
    };
    run.backward = [&be, shape, options](std::span<const Tensor> w) {
      Tensor dqkv = copy_of(be, w[0]);
      be.rotary(dqkv, shape, options, true);
      return std::vector<Tensor>{dqkv};
    };
    return forward_first(std::move(run));
  });
}

// The flash attention ops on fused qkv; `configure` sets the mask and dropout of its options.
OpCase flash_attention_case(std::string name, std::string what,
                            std::function<void(AttentionOptions&, int64_t batch)> configure) {
  return op(std::move(name), std::move(what), [configure](Backend& be, uint32_t seed, int64_t s) {
    const AttentionShape shape{.batch = 2 * s, .seq = 4, .heads = 4, .groups = 2, .head_dim = 4};
    AttentionOptions options{.scale = 0.5f};  // 1 / sqrt(HD)
    configure(options, shape.batch);
    Tensor qkv = random_tensor(be, {shape.batch * shape.seq, shape.qkv_width()}, seed);
    OpRun run{.inputs = {{"qkv", qkv}}};
    auto forward = [&be, qkv, shape, options](Tensor& lse) {
      Tensor out = be.empty({qkv.dim(0), shape.heads * shape.head_dim}, DType::F32);
      lse = be.empty({shape.batch, shape.heads, shape.seq}, DType::F32);
      be.attention_forward(qkv, shape, options, out, lse);
      return out;
    };
    run.forward = [forward] {
      Tensor lse;
      return std::vector<Tensor>{forward(lse)};
    };
    run.backward = [&be, forward, qkv, shape, options](std::span<const Tensor> w) {
      Tensor lse;
      Tensor out = forward(lse);
      Tensor dqkv = empty_like(be, qkv);
      be.attention_backward(qkv, out, w[0], lse, shape, options, dqkv);
      return std::vector<Tensor>{dqkv};
    };
    return run;
  });
}

// Every other sequence padded to `short_length` keys.
std::vector<int64_t> alternating_lengths(int64_t batch, int64_t full, int64_t short_length) {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < batch; ++b) lengths.push_back(b % 2 == 1 ? short_length : full);
  return lengths;
}

std::vector<OpCase> flash_attention_cases() {
  constexpr std::string_view shape = "qkv [B*S, (NH + 2G) * HD]; B 2, S 4, NH 4, G 2, HD 4";
  std::vector<OpCase> cases;
  cases.push_back(flash_attention_case("flash_attention_causal",
                                       "causal, " + std::string(shape),
                                       [](AttentionOptions& o, int64_t) { o.causal = true; }));
  cases.push_back(flash_attention_case(
      "flash_attention_padded", "bidirectional over key lengths 4 and 2, " + std::string(shape),
      [](AttentionOptions& o, int64_t batch) {
        o.causal = false;
        o.key_lengths = alternating_lengths(batch, 4, 2);
      }));
  cases.push_back(flash_attention_case(
      "flash_attention_documents", "causal over packed documents (first_keys), " + std::string(shape),
      [](AttentionOptions& o, int64_t batch) {
        o.causal = true;
        for (int64_t b = 0; b < batch; ++b) {
          const std::vector<int64_t> one = b % 2 == 0 ? std::vector<int64_t>{0, 0, 2, 2}
                                                      : std::vector<int64_t>{0, 1, 1, 1};
          o.first_keys.insert(o.first_keys.end(), one.begin(), one.end());
        }
      }));
  cases.push_back(flash_attention_case(
      "flash_attention_dropout", "causal, dropout 0.2 on the probabilities (a fixed key), " +
                                     std::string(shape),
      [](AttentionOptions& o, int64_t) {
        o.causal = true;
        o.dropout = 0.2f;
        o.rng = kDropoutKey;
      }));
  return cases;
}

// Materialised attention with an additive score bias: the bias has 3 columns of which the 2
// heads use columns 1..2 (bias_offset 1), so column 0's gradient must stay zero.
OpCase cross_attention_case(bool packed) {
  std::string name = packed ? "packed_attention_bias_causal" : "cross_attention_bias";
  std::string what =
      packed ? "causal self-attention over fused qkv [B*S, 3 * NH * HD] with a score bias; B 2, "
               "S 4, NH 2, G 2, HD 4 (T5's decoder)"
             : "q [B*4, NH * HD] over kv [B*5, 2G * HD], key lengths 5 and 3, a score bias "
               "[4 * 5, 3]; B 2, NH 2, G 1, HD 4";
  return op(std::move(name), std::move(what), [packed](Backend& be, uint32_t seed, int64_t s) {
    const CrossAttentionShape shape{.batch = 2 * s,
                                    .q_seq = 4,
                                    .kv_seq = packed ? 4 : 5,
                                    .heads = 2,
                                    .groups = packed ? 2 : 1,
                                    .head_dim = 4,
                                    .packed = packed};
    const int64_t columns = packed ? 2 : 3;
    Tensor q = random_tensor(be, {shape.batch * shape.q_seq, shape.q_width()}, seed);
    Tensor kv = packed ? q : random_tensor(be, {shape.batch * shape.kv_seq, shape.kv_width()}, seed + 1);
    Tensor bias = random_tensor(be, {shape.q_seq * shape.kv_seq, columns}, seed + 2);
    AttentionOptions options{.scale = 0.5f, .causal = packed};
    if (!packed) options.key_lengths = alternating_lengths(shape.batch, 5, 3);
    options.bias_columns = columns;
    options.bias_offset = packed ? 0 : 1;
    OpRun run{.inputs = packed ? std::vector<Named>{{"qkv", q}, {"bias", bias}}
                               : std::vector<Named>{{"q", q}, {"kv", kv}, {"bias", bias}}};
    // The options point at the bias: each closure keeps its own handle to it.
    auto forward = [&be, q, kv, bias, shape, options](Tensor& lse) {
      AttentionOptions o = options;
      o.bias = &bias;
      Tensor out = be.empty({q.dim(0), shape.out_width()}, DType::F32);
      lse = be.empty({shape.batch, shape.heads, shape.q_seq}, DType::F32);
      be.cross_attention_forward(q, kv, shape, o, out, lse);
      return out;
    };
    run.forward = [forward] {
      Tensor lse;
      return std::vector<Tensor>{forward(lse)};
    };
    run.backward = [&be, forward, q, kv, bias, shape, options, packed](std::span<const Tensor> w) {
      Tensor lse;
      Tensor out = forward(lse);
      AttentionOptions o = options;
      o.bias = &bias;
      Tensor dq = empty_like(be, q), dkv = packed ? dq : empty_like(be, kv);
      Tensor dbias = zeros_like(be, bias);
      be.cross_attention_backward(q, kv, out, w[0], lse, shape, o, dq, dkv, &dbias);
      if (packed) return std::vector<Tensor>{dq, dbias};
      return std::vector<Tensor>{dq, dkv, dbias};
    };
    return run;
  });
}

// --- loss -------------------------------------------------------------------------------------

// loss [6B] of logits [6B, 10]; with a shard, columns 4..13 of a vocabulary of 16, so some
// targets lie outside it (loss = lse there) and the lse is the shard's own.
OpCase cross_entropy_case(bool shard) {
  std::string name = shard ? "cross_entropy_vocab_shard" : "cross_entropy";
  std::string what = shard ? "loss [6B] of a vocabulary shard: logits [6B, 10], columns 4..13 of 16"
                           : "loss [6B] = logsumexp(logits [6B, 10]) - logits[target]";
  return op(std::move(name), std::move(what), [shard](Backend& be, uint32_t seed, int64_t s) {
    Tensor logits = random_tensor(be, {6 * s, 10}, seed, 2.0f);
    Tensor targets = ids(be, 6 * s, shard ? 16 : 10, seed);
    const tensor::VocabShard vocab{.first = shard ? 4 : 0, .partial = shard};
    OpRun run{.inputs = {{"logits", logits}}};
    auto forward = [&be, logits, targets, vocab](Tensor& lse) {
      Tensor loss = be.empty({logits.dim(0)}, DType::F32);
      lse = be.empty({logits.dim(0)}, DType::F32);
      be.cross_entropy_forward(logits, targets, loss, lse, vocab);
      return loss;
    };
    run.forward = [forward] {
      Tensor lse;
      return std::vector<Tensor>{forward(lse)};
    };
    run.backward = [&be, forward, logits, targets, vocab](std::span<const Tensor> w) {
      Tensor lse;
      forward(lse);
      Tensor dlogits = empty_like(be, logits);
      be.cross_entropy_backward(logits, targets, lse, w[0], dlogits, vocab);
      return std::vector<Tensor>{dlogits};
    };
    return run;
  });
}

}  // namespace

std::vector<OpCase> backend_op_cases() {
  std::vector<OpCase> cases = {
      gemm_case(),
      gemm_batched_case(),
      gemm_bias_case(),
      mlp_gelu_fused_case(),
      activation_case("gelu_tanh", Act::GeluTanh),
      activation_case("gelu_erf", Act::GeluErf),
      activation_case("swiglu", Act::Swiglu),
      activation_case("geglu", Act::Geglu),
      dropout_case(),
      dropout_add_case(),
      bias_dropout_add_case(),
      layer_norm_case(),
      rms_norm_case(),
      qk_norm_case(),
      embedding_case(),
      embedding_shard_case(),
      rotary_case(),
  };
  for (OpCase& c : flash_attention_cases()) cases.push_back(std::move(c));
  cases.push_back(cross_attention_case(false));
  cases.push_back(cross_attention_case(true));
  cases.push_back(cross_entropy_case(false));
  cases.push_back(cross_entropy_case(true));
  return cases;
}

}  // namespace megatron::ops_test
