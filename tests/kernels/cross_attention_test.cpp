// CUDA materialised attention (kernels/cross_attention.cu) against the CPU backend: forward out
// and lse and backward dq and dkv, with fewer and more queries than keys, GQA, the padding mask,
// dropout (a tensor-parallel rank's share of the numbering), every float dtype, and
// reproducibility; packed fused QKV rows, the causal mask, and the additive score bias with its
// accumulated gradient dbias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "tensor/host_io.hpp"

namespace megatron::test_support {
namespace cross_attention_test {

using tensor::AttentionOptions;
using tensor::CrossAttentionShape;

// Both backends compute in f32 from the same stored inputs and differ only in summation order
// and exp (expf against a Cephes polynomial): f32 results ~1e-6 of the output scale apart. 1e-4
// keeps a wide margin while a wrong mask, dropout index or missing term is off by 1e-2 or more.
// 16-bit outputs are those f32 values rounded, so they may land on the neighbouring value: the
// harness's two ulps of the dtype.
double tolerance(DType dtype) { return dtype == DType::F32 ? 1e-4 : tolerance_for(dtype); }
// lse ~ log(kv_seq) + max score ~ 5 in f32 whatever the dtype: ~1e-7 relative apart.
constexpr double kLseTolerance = 1e-5;
// dbias is f32 for every dtype, its terms computed in f32 from the same stored inputs: as the f32
// outputs' 1e-4.
constexpr double kBiasTolerance = 1e-4;

struct Case {
  CrossAttentionShape shape;
  DType dtype = DType::F32;
  float dropout = 0.0f;
  int64_t head_offset = 0;
  int64_t total_heads = 0;
  std::vector<int64_t> key_lengths;  // the padding mask; empty: none
  bool causal = false;
  int64_t bias_columns = 0;  // 0: no score bias
  int64_t bias_offset = 0;
};

std::string describe(const Case& c) {
  const CrossAttentionShape& s = c.shape;
  return "batch " + std::to_string(s.batch) + ", " + std::to_string(s.q_seq) + " queries over " +
         std::to_string(s.kv_seq) + " keys, heads " + std::to_string(s.heads) + ", groups " +
         std::to_string(s.groups) + ", head_dim " + std::to_string(s.head_dim) +
         (s.packed ? ", packed" : "") + (c.causal ? ", causal" : "") + ", " +
         std::string(tensor::name(c.dtype)) + ", dropout " + std::to_string(c.dropout) +
         ", head_offset " + std::to_string(c.head_offset) + "/" + std::to_string(c.total_heads) +
         (c.key_lengths.empty() ? ""
                                : ", " + std::to_string(c.key_lengths.size()) + " key lengths") +
         (c.bias_columns > 0 ? ", bias columns " + std::to_string(c.bias_offset) + "+ of " +
                                   std::to_string(c.bias_columns)
                             : "");
}

AttentionOptions options_for(const Case& c) {
  return {.scale = 1.0f / std::sqrt(float(c.shape.head_dim)),
          .causal = c.causal,
          .dropout = c.dropout,
          .rng = {.seed = 4321, .stream = 99},
          .head_offset = c.head_offset,
          .total_heads = c.total_heads,
          .key_lengths = c.key_lengths,
          .bias_columns = c.bias_columns,
          .bias_offset = c.bias_offset};
}

// The options of one backend's call: its own copy of the bias, if any.
AttentionOptions with_bias(AttentionOptions o, const Tensor& bias) {
  if (o.bias_columns > 0) o.bias = &bias;
  return o;
}

class CudaCrossAttention : public CudaOpTest {
 protected:
  // These tests are the attention kernels': bf16 would otherwise go to cuDNN
  // (cudnn_attention_test).
  tensor::CudaOptions gpu_options() const override { return {.cudnn_attention = false}; }
  // NaN everywhere: an element the op fails to write cannot pass the comparison.
  Pair poisoned(const Shape& shape, DType dtype) {
    return make(
        std::vector<float>(size_t(tensor::numel(shape)), std::numeric_limits<float>::quiet_NaN()),
        shape, dtype);
  }

  static Shape q_shape(const CrossAttentionShape& s) { return {s.batch * s.q_seq, s.q_width()}; }
  static Shape kv_shape(const CrossAttentionShape& s) { return {s.batch * s.kv_seq, s.kv_width()}; }
  static Shape out_shape(const CrossAttentionShape& s) {
    return {s.batch * s.q_seq, s.out_width()};
  }
  static Shape bias_shape(const Case& c) {
    return {c.shape.q_seq, c.shape.kv_seq, std::max<int64_t>(c.bias_columns, 0)};
  }

  struct Forward {
    Pair q, kv, out, lse, bias;  // packed: kv is q; bias empty without one
  };
  Forward forward(const Case& c) {
    const CrossAttentionShape& s = c.shape;
    Forward f;
    f.q = random(q_shape(s), c.dtype, 1);
    f.kv = s.packed ? f.q : random(kv_shape(s), c.dtype, 2);
    f.out = poisoned(out_shape(s), c.dtype);
    f.lse = poisoned({s.batch, s.heads, s.q_seq}, DType::F32);
    // Values of magnitude ~2, as learned T5 biases are.
    f.bias = c.bias_columns > 0 ? random(bias_shape(c), DType::F32, 4, 2.0f) : Pair{};
    const AttentionOptions o = options_for(c);
    cpu().cross_attention_forward(f.q.cpu, f.kv.cpu, s, with_bias(o, f.bias.cpu), f.out.cpu,
                                  f.lse.cpu);
    gpu().cross_attention_forward(f.q.gpu, f.kv.gpu, s, with_bias(o, f.bias.gpu), f.out.gpu,
                                  f.lse.gpu);
    return f;
  }

  // Both backends get the same out and lse (the CPU's), so only the backward is compared.
  struct Backward {
    Pair q, kv, out, dout, lse, bias;
  };
  Backward backward_inputs(const Case& c) {
    const Forward f = forward(c);
    const Shape& out = f.out.cpu.shape();
    return {f.q,
            f.kv,
            make(tensor::to_floats(cpu(), f.out.cpu), out, c.dtype),
            random(out, c.dtype, 3),
            make(tensor::to_floats(cpu(), f.lse.cpu), f.lse.cpu.shape(), DType::F32),
            f.bias};
  }
  struct Grads {
    Pair dq, dkv, dbias;  // packed: dkv is dq
  };
  Grads backward(const Case& c, const Backward& in) {
    Grads g;
    g.dq = poisoned(in.q.cpu.shape(), c.dtype);
    g.dkv = c.shape.packed ? g.dq : poisoned(in.kv.cpu.shape(), c.dtype);
    // dbias accumulates: onto nonzero values, which must be kept.
    if (c.bias_columns > 0) g.dbias = random(bias_shape(c), DType::F32, 5);
    const AttentionOptions o = options_for(c);
    cpu().cross_attention_backward(in.q.cpu, in.kv.cpu, in.out.cpu, in.dout.cpu, in.lse.cpu,
                                   c.shape, with_bias(o, in.bias.cpu), g.dq.cpu, g.dkv.cpu,
                                   c.bias_columns > 0 ? &g.dbias.cpu : nullptr);
    gpu().cross_attention_backward(in.q.gpu, in.kv.gpu, in.out.gpu, in.dout.gpu, in.lse.gpu,
                                   c.shape, with_bias(o, in.bias.gpu), g.dq.gpu, g.dkv.gpu,
                                   c.bias_columns > 0 ? &g.dbias.gpu : nullptr);
    return g;
  }

  void check_both(const Case& c) {
    SCOPED_TRACE(describe(c));
    const Forward f = forward(c);
    expect_close(f.out, tolerance(c.dtype), 0.0, "out");
    expect_close(f.lse, kLseTolerance, 0.0, "lse");
    const Grads g = backward(c, backward_inputs(c));
    expect_close(g.dq, tolerance(c.dtype), 0.0, c.shape.packed ? "dqkv" : "dq");
    if (!c.shape.packed) expect_close(g.dkv, tolerance(c.dtype), 0.0, "dkv");
    // f32 whatever the dtype: the batch's score gradients (each ~1, computed in f32 from the same
    // inputs) summed in a fixed order onto values ~1, as far apart as the f32 outputs.
    if (c.bias_columns > 0) expect_close(g.dbias, kBiasTolerance, 0.0, "dbias");
  }

  std::vector<std::byte> bytes(const Tensor& t) {
    std::vector<std::byte> b(t.bytes());
    gpu().read(t, b.data());
    return b;
  }
};

// T5-like: fewer decoder queries than encoder keys; and the other way round, with more keys
// than a block has threads; GQA of two query heads a group; head_dim 40 and 12, not powers of two.
const CrossAttentionShape kFewerQueries{
    .batch = 2, .q_seq = 37, .kv_seq = 150, .heads = 4, .groups = 2, .head_dim = 40};
const CrossAttentionShape kMoreQueries{
    .batch = 3, .q_seq = 140, .kv_seq = 13, .heads = 4, .groups = 2, .head_dim = 12};

TEST_F(CudaCrossAttention, MatchesCpuWithFewerQueriesThanKeys) {
  for (DType dtype : {DType::F32, DType::Bf16, DType::F16})
    check_both({.shape = kFewerQueries, .dtype = dtype});
}

TEST_F(CudaCrossAttention, MatchesCpuWithMoreQueriesThanKeys) {
  for (DType dtype : {DType::F32, DType::Bf16}) check_both({.shape = kMoreQueries, .dtype = dtype});
}

TEST_F(CudaCrossAttention, PaddingMaskMatchesCpu) {
  check_both({.shape = kFewerQueries, .key_lengths = {150, 1}});
  check_both({.shape = kMoreQueries, .dtype = DType::Bf16, .key_lengths = {5, 13, 12}});
}

TEST_F(CudaCrossAttention, DropoutDropsTheCpusProbabilities) {
  check_both({.shape = kFewerQueries, .dropout = 0.1f, .key_lengths = {77, 150}});
  check_both({.shape = kMoreQueries, .dtype = DType::Bf16, .dropout = 0.3f});
}

TEST_F(CudaCrossAttention, TensorParallelShardDrawsTheWholeModelsMask) {
  // This rank holds heads 4..7 of 12: dropout elements are numbered as in the whole model.
  check_both({.shape = kFewerQueries, .dropout = 0.2f, .head_offset = 4, .total_heads = 12});
}

TEST_F(CudaCrossAttention, T5SizedHeadsMatchCpu) {
  // T5-base's decoder over a full encoder: 8 heads of 64 (t5 uses no GQA), 128 over 512 keys.
  check_both(
      {.shape = {.batch = 1, .q_seq = 128, .kv_seq = 512, .heads = 8, .groups = 8, .head_dim = 64},
       .dtype = DType::Bf16,
       .dropout = 0.1f,
       .key_lengths = {300}});
}

TEST_F(CudaCrossAttention, IsBitwiseReproducible) {
  // No float atomics: dK and dV of a group sum its heads and queries in a fixed order.
  const Case c{.shape = kFewerQueries, .dropout = 0.1f, .key_lengths = {100, 150}};
  const Backward in = backward_inputs(c);
  const Grads first = backward(c, in), second = backward(c, in);
  EXPECT_TRUE(bytes(first.dq.gpu) == bytes(second.dq.gpu)) << "dq differs between two runs";
  EXPECT_TRUE(bytes(first.dkv.gpu) == bytes(second.dkv.gpu)) << "dkv differs between two runs";
  const Forward a = forward(c), b = forward(c);
  EXPECT_TRUE(bytes(a.out.gpu) == bytes(b.out.gpu)) << "out differs between two runs";
  EXPECT_TRUE(bytes(a.lse.gpu) == bytes(b.lse.gpu)) << "lse differs between two runs";
}

// Fused QKV rows (AttentionShape's columns): GQA of two query heads a group; 150 tokens, more
// than a block has threads; head_dim 40.
const CrossAttentionShape kPacked{.batch = 2,
                                  .q_seq = 150,
                                  .kv_seq = 150,
                                  .heads = 4,
                                  .groups = 2,
                                  .head_dim = 40,
                                  .packed = true};

TEST_F(CudaCrossAttention, PackedLayoutMatchesCpu) {
  // dq and dkv are one NaN-poisoned tensor: each of its elements must be written, by the kernel
  // that owns its column (dQ: query columns; dK/dV: key and value columns).
  for (DType dtype : {DType::F32, DType::Bf16}) check_both({.shape = kPacked, .dtype = dtype});
}

TEST_F(CudaCrossAttention, CausalMaskMatchesCpu) {
  check_both({.shape = kPacked, .causal = true});
  CrossAttentionShape separate = kPacked;  // the causal mask without packing
  separate.packed = false;
  check_both({.shape = separate, .dtype = DType::Bf16, .causal = true});
}

TEST_F(CudaCrossAttention, CausalPackedDropoutAndPaddingMaskMatchCpu) {
  check_both({.shape = kPacked,
              .dropout = 0.2f,
              .head_offset = 2,
              .total_heads = 8,
              .key_lengths = {150, 61},
              .causal = true});
}

TEST_F(CudaCrossAttention, BiasAndItsAccumulatedGradientMatchCpu) {
  // A tensor-parallel rank's share: heads 3..6 of 9 bias columns; onto a nonzero dbias.
  check_both({.shape = kFewerQueries, .bias_columns = 9, .bias_offset = 3});
  check_both({.shape = kPacked,
              .dtype = DType::Bf16,
              .dropout = 0.1f,
              .key_lengths = {150, 99},
              .causal = true,
              .bias_columns = 4,
              .bias_offset = 0});
}

TEST_F(CudaCrossAttention, T5SizedBiasedSelfAttentionMatchesCpu) {
  // T5-base's encoder self-attention: 12 heads of 64 over 512 tokens, with the position bias.
  check_both({.shape = {.batch = 2,
                        .q_seq = 512,
                        .kv_seq = 512,
                        .heads = 12,
                        .groups = 12,
                        .head_dim = 64,
                        .packed = true},
              .dtype = DType::Bf16,
              .dropout = 0.1f,
              .key_lengths = {512, 300},
              .bias_columns = 12});
}

TEST_F(CudaCrossAttention, BiasGradientIsBitwiseReproducible) {
  // No float atomics: each dbias element sums the batch in order in one thread.
  const Case c{.shape = kPacked,
               .dropout = 0.1f,
               .key_lengths = {150, 100},
               .causal = true,
               .bias_columns = 6,
               .bias_offset = 1};
  const Backward in = backward_inputs(c);
  const Grads first = backward(c, in), second = backward(c, in);
  EXPECT_TRUE(bytes(first.dq.gpu) == bytes(second.dq.gpu)) << "dqkv differs between two runs";
  EXPECT_TRUE(bytes(first.dbias.gpu) == bytes(second.dbias.gpu)) << "dbias differs";
}

TEST_F(CudaCrossAttention, RefusesABiasWithoutADbiasAndFlashAttentionRefusesABias) {
  const Case c{.shape = kFewerQueries, .bias_columns = 4};
  const Backward in = backward_inputs(c);
  Tensor dq = gpu().empty(in.q.gpu.shape(), DType::F32);
  Tensor dkv = gpu().empty(in.kv.gpu.shape(), DType::F32);
  const AttentionOptions o = with_bias(options_for(c), in.bias.gpu);
  EXPECT_THROW(gpu().cross_attention_backward(in.q.gpu, in.kv.gpu, in.out.gpu, in.dout.gpu,
                                              in.lse.gpu, c.shape, o, dq, dkv, nullptr),
               std::logic_error);
  const tensor::AttentionShape self{.batch = 1, .seq = 4, .heads = 4, .groups = 4, .head_dim = 64};
  const Tensor qkv = gpu().zeros({self.seq, self.qkv_width()}, DType::F32);
  Tensor out = gpu().empty({self.seq, self.heads * self.head_dim}, DType::F32);
  Tensor lse = gpu().empty({self.batch, self.heads, self.seq}, DType::F32);
  Tensor dqkv = gpu().empty(qkv.shape(), DType::F32);
  const Tensor bias = gpu().zeros({self.seq, self.seq, self.heads}, DType::F32);
  AttentionOptions flash{.scale = 0.125f, .bias = &bias, .bias_columns = self.heads};
  EXPECT_THROW(gpu().attention_forward(qkv, self, flash, out, lse), std::logic_error);
  EXPECT_THROW(gpu().attention_backward(qkv, out, out, lse, self, flash, dqkv), std::logic_error);
}

TEST_F(CudaCrossAttention, RefusesACausalMaskOverUnequalLengthsAndKeyLengthsOutsideTheKeys) {
  const CrossAttentionShape& s = kMoreQueries;
  const Shape q_shape{s.batch * s.q_seq, s.heads * s.head_dim};
  Tensor q = gpu().zeros(q_shape, DType::F32);
  Tensor kv = gpu().zeros({s.batch * s.kv_seq, 2 * s.groups * s.head_dim}, DType::F32);
  Tensor out = gpu().empty(q_shape, DType::F32);
  Tensor lse = gpu().empty({s.batch, s.heads, s.q_seq}, DType::F32);
  AttentionOptions causal = options_for({.shape = s});
  causal.causal = true;
  EXPECT_THROW(gpu().cross_attention_forward(q, kv, s, causal, out, lse), std::logic_error);
  for (const int64_t keys : {int64_t{0}, s.kv_seq + 1}) {
    const AttentionOptions o = options_for({.shape = s, .key_lengths = {keys, 1, 1}});
    EXPECT_THROW(gpu().cross_attention_forward(q, kv, s, o, out, lse), std::logic_error) << keys;
  }
}

}  // namespace cross_attention_test
}  // namespace megatron::test_support
