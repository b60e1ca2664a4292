// CUDA cross-attention (kernels/cross_attention.cu) against the CPU backend: forward out and lse
// and backward dq and dkv, with fewer and more queries than keys, GQA, the padding mask, dropout
// (a tensor-parallel rank's share of the numbering), every float dtype, and reproducibility.
#include <gtest/gtest.h>

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
namespace {

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

struct Case {
  CrossAttentionShape shape;
  DType dtype = DType::F32;
  float dropout = 0.0f;
  int64_t head_offset = 0;
  int64_t total_heads = 0;
  std::vector<int64_t> key_lengths;  // the padding mask; empty: none
};

std::string describe(const Case& c) {
  const CrossAttentionShape& s = c.shape;
  return "batch " + std::to_string(s.batch) + ", " + std::to_string(s.q_seq) + " queries over " +
         std::to_string(s.kv_seq) + " keys, heads " + std::to_string(s.heads) + ", groups " +
         std::to_string(s.groups) + ", head_dim " + std::to_string(s.head_dim) + ", " +
         std::string(tensor::name(c.dtype)) + ", dropout " + std::to_string(c.dropout) +
         ", head_offset " + std::to_string(c.head_offset) + "/" + std::to_string(c.total_heads) +
         (c.key_lengths.empty() ? ""
                                : ", " + std::to_string(c.key_lengths.size()) + " key lengths");
}

AttentionOptions options_for(const Case& c) {
  return {.scale = 1.0f / std::sqrt(float(c.shape.head_dim)),
          .causal = false,
          .dropout = c.dropout,
          .rng = {.seed = 4321, .stream = 99},
          .head_offset = c.head_offset,
          .total_heads = c.total_heads,
          .key_lengths = c.key_lengths};
}

class CudaCrossAttention : public CudaOpTest {
 protected:
  // NaN everywhere: an element the op fails to write cannot pass the comparison.
  Pair poisoned(const Shape& shape, DType dtype) {
    return make(
        std::vector<float>(size_t(tensor::numel(shape)), std::numeric_limits<float>::quiet_NaN()),
        shape, dtype);
  }

  struct Forward {
    Pair q, kv, out, lse;
  };
  Forward forward(const Case& c) {
    const CrossAttentionShape& s = c.shape;
    const Shape q_shape{s.batch * s.q_seq, s.heads * s.head_dim};
    Forward f{random(q_shape, c.dtype, 1),
              random({s.batch * s.kv_seq, 2 * s.groups * s.head_dim}, c.dtype, 2),
              poisoned(q_shape, c.dtype), poisoned({s.batch, s.heads, s.q_seq}, DType::F32)};
    const AttentionOptions o = options_for(c);
    cpu().cross_attention_forward(f.q.cpu, f.kv.cpu, s, o, f.out.cpu, f.lse.cpu);
    gpu().cross_attention_forward(f.q.gpu, f.kv.gpu, s, o, f.out.gpu, f.lse.gpu);
    return f;
  }

  // Both backends get the same out and lse (the CPU's), so only the backward is compared.
  struct Backward {
    Pair q, kv, out, dout, lse;
  };
  Backward backward_inputs(const Case& c) {
    const Forward f = forward(c);
    const Shape& out_shape = f.out.cpu.shape();
    return {f.q, f.kv, make(tensor::to_floats(cpu(), f.out.cpu), out_shape, c.dtype),
            random(out_shape, c.dtype, 3),
            make(tensor::to_floats(cpu(), f.lse.cpu), f.lse.cpu.shape(), DType::F32)};
  }
  struct Grads {
    Pair dq, dkv;
  };
  Grads backward(const Case& c, const Backward& in) {
    Grads g{poisoned(in.q.cpu.shape(), c.dtype), poisoned(in.kv.cpu.shape(), c.dtype)};
    const AttentionOptions o = options_for(c);
    cpu().cross_attention_backward(in.q.cpu, in.kv.cpu, in.out.cpu, in.dout.cpu, in.lse.cpu,
                                   c.shape, o, g.dq.cpu, g.dkv.cpu);
    gpu().cross_attention_backward(in.q.gpu, in.kv.gpu, in.out.gpu, in.dout.gpu, in.lse.gpu,
                                   c.shape, o, g.dq.gpu, g.dkv.gpu);
    return g;
  }

  void check_both(const Case& c) {
    SCOPED_TRACE(describe(c));
    const Forward f = forward(c);
    expect_close(f.out, tolerance(c.dtype), 0.0, "out");
    expect_close(f.lse, kLseTolerance, 0.0, "lse");
    const Grads g = backward(c, backward_inputs(c));
    expect_close(g.dq, tolerance(c.dtype), 0.0, "dq");
    expect_close(g.dkv, tolerance(c.dtype), 0.0, "dkv");
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

TEST_F(CudaCrossAttention, RefusesACausalMaskAndKeyLengthsOutsideTheKeys) {
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

}  // namespace
}  // namespace megatron::test_support
