// CudaBackend's GEMMs (cuBLASLt) against the CPU backend (OpenBLAS): every transpose, batched,
// accumulating, the fused bias epilogue, f32 with and without TF32, bf16 and f16.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace gemm_test {

class CudaGemmTest : public CudaOpTest {
 protected:
  // op(a) [m, k] @ op(b) [k, n] on both backends into c of `out` dtype.
  Pair product(int64_t m, int64_t n, int64_t k, bool ta, bool tb, DType in, DType out,
               float alpha = 1.0f, float beta = 0.0f, uint32_t seed = 1) {
    Pair a = random(ta ? Shape{k, m} : Shape{m, k}, in, seed);
    Pair b = random(tb ? Shape{n, k} : Shape{k, n}, in, seed + 1);
    Pair c = random({m, n}, out, seed + 2);
    cpu().gemm(a.cpu, ta, b.cpu, tb, c.cpu, alpha, beta);
    gpu().gemm(a.gpu, ta, b.gpu, tb, c.gpu, alpha, beta);
    return c;
  }
};

// Sums of k products of unit normals have magnitude ~sqrt(k); f32 results differ only in the
// order of summation (relative 1e-5 of the largest value covers k = 1000 with margin).
TEST_F(CudaGemmTest, F32MatchesTheCpuForEveryTranspose) {
  CudaBackend exact({.allow_tf32 = false});
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << ta << ", trans_b " << tb);
      Pair a = random(ta ? Shape{129, 67} : Shape{67, 129}, DType::F32, 3);
      Pair b = random(tb ? Shape{45, 129} : Shape{129, 45}, DType::F32, 4);
      Pair c{cpu().empty({67, 45}, DType::F32), exact.empty({67, 45}, DType::F32)};
      Tensor ga = tensor::from_floats(exact, tensor::to_floats(cpu(), a.cpu), a.cpu.shape());
      Tensor gb = tensor::from_floats(exact, tensor::to_floats(cpu(), b.cpu), b.cpu.shape());
      cpu().gemm(a.cpu, ta, b.cpu, tb, c.cpu, 1.0f, 0.0f);
      exact.gemm(ga, ta, gb, tb, c.gpu, 1.0f, 0.0f);
      expect_close(tensor::to_floats(exact, c.gpu), tensor::to_floats(cpu(), c.cpu), 1e-5, 0.0,
                   "c");
    }
  }
}

// TF32 keeps 10 mantissa bits of each input: relative error about 2^-11 per product.
TEST_F(CudaGemmTest, Tf32StaysWithinItsPrecision) {
  expect_close(product(96, 80, 512, false, true, DType::F32, DType::F32), 2e-3, 0.0, "c");
}

TEST_F(CudaGemmTest, AccumulatesWithAlphaAndBeta) {
  expect_close(product(33, 70, 100, true, false, DType::F32, DType::F32, 0.5f, 1.0f), 2e-3, 0.0,
               "c");
}

// 16-bit inputs are exact in f32 and both sides accumulate in f32; a 16-bit output rounds once.
TEST_F(CudaGemmTest, Bf16InputsWithF32AndBf16Outputs) {
  expect_close(product(64, 96, 256, false, true, DType::Bf16, DType::F32), 1e-5, 0.0, "f32 c");
  expect_close(product(64, 96, 256, false, true, DType::Bf16, DType::Bf16), tolerance_for(DType::Bf16),
               0.0, "bf16 c");
}

TEST_F(CudaGemmTest, F16InputsWithF16Output) {
  expect_close(product(50, 72, 130, true, true, DType::F16, DType::F16), tolerance_for(DType::F16),
               0.0, "f16 c");
}

TEST_F(CudaGemmTest, WeightGradientAccumulatesIntoF32) {
  // A linear layer's dW += dy^T x: bf16 activations into an f32 gradient with beta 1.
  expect_close(product(48, 40, 300, true, false, DType::Bf16, DType::F32, 1.0f, 1.0f), 1e-5, 0.0,
               "dW");
}

TEST_F(CudaGemmTest, BiasEpilogueEqualsGemmThenBiasAdd) {
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    Pair x = random({77, 128}, dtype, 5), w = random({96, 128}, dtype, 6),
         bias = random({96}, dtype, 7), y = empty({77, 96}, dtype);
    cpu().gemm_bias(x.cpu, false, w.cpu, true, bias.cpu, y.cpu);
    gpu().gemm_bias(x.gpu, false, w.gpu, true, bias.gpu, y.gpu);
    expect_close(y, dtype == DType::F32 ? 2e-3 : tolerance_for(dtype), 0.0, "y");
  }
}

// cuBLASLt's tanh-GeLU epilogues against the CPU's ops one after another: fc1's GEMM + bias +
// GeLU keeping the pre-activation, and fc2's data gradient times GeLU' with fc1's bias gradient.
TEST_F(CudaGemmTest, GeluAuxBiasEpilogueEqualsGemmBiasThenGelu) {
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    Pair x = random({77, 128}, dtype, 5), w = random({96, 128}, dtype, 6, 0.1f),
         bias = random({96}, dtype, 7), pre = empty({77, 96}, dtype), act = empty({77, 96}, dtype);
    cpu().gemm_bias_gelu(x.cpu, false, w.cpu, true, bias.cpu, pre.cpu, act.cpu);
    gpu().gemm_bias_gelu(x.gpu, false, w.gpu, true, bias.gpu, pre.gpu, act.gpu);
    const double tolerance = dtype == DType::F32 ? 2e-3 : tolerance_for(dtype);
    expect_close(pre, tolerance, 1e-3, "pre-activation");
    expect_close(act, tolerance, 1e-3, "activation");
  }
}

TEST_F(CudaGemmTest, DgeluBgradEpilogueEqualsGemmThenGeluBackwardAndBiasGradient) {
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    Pair dy = random({77, 64}, dtype, 8), w = random({64, 96}, dtype, 9, 0.1f),
         pre = random({77, 96}, dtype, 10), dpre = empty({77, 96}, dtype),
         dbias = zeros({96}, DType::F32);
    cpu().gemm_dgelu_bgrad(dy.cpu, false, w.cpu, false, pre.cpu, dpre.cpu, &dbias.cpu);
    gpu().gemm_dgelu_bgrad(dy.gpu, false, w.gpu, false, pre.gpu, dpre.gpu, &dbias.gpu);
    const double tolerance = dtype == DType::F32 ? 2e-3 : tolerance_for(dtype);
    expect_close(dpre, tolerance, 1e-3, "dpre");
    // 77 rows summed, in the dtype on the GPU: a few ulps of it.
    expect_close(dbias, 4 * tolerance, 1e-2, "dbias");
  }
}

// One shape twice: first x 4 bytes off its alignment with an aligned bias, then the other way
// round. cuBLASLt picks the bias epilogue's algorithm for the bias's alignment, so each call must
// get an algorithm chosen for its own bias, not the cached one of the other call.
TEST_F(CudaGemmTest, BiasEpilogueSuitsEachCallsBiasAlignment) {
  const int64_t m = 77, n = 96, k = 128;
  Pair x_buffer = random({m * k + 1}, DType::F32, 11), w = random({n, k}, DType::F32, 12),
       bias_buffer = random({n + 1}, DType::F32, 13);
  auto part = [](const Pair& p, int64_t offset, int64_t count, const Shape& shape) {
    return Pair{p.cpu.slice(offset, offset + count).view(shape),
                p.gpu.slice(offset, offset + count).view(shape)};
  };
  for (const bool x_shifted : {true, false}) {
    SCOPED_TRACE(x_shifted ? "x shifted by one element" : "bias shifted by one element");
    Pair x = part(x_buffer, x_shifted ? 1 : 0, m * k, {m, k});
    Pair bias = part(bias_buffer, x_shifted ? 0 : 1, n, {n});
    Pair y = empty({m, n}, DType::F32);
    cpu().gemm_bias(x.cpu, false, w.cpu, true, bias.cpu, y.cpu);
    gpu().gemm_bias(x.gpu, false, w.gpu, true, bias.gpu, y.gpu);
    expect_close(y, 2e-3, 0.0, "y");  // TF32, as in BiasEpilogueEqualsGemmThenBiasAdd
  }
}

TEST_F(CudaGemmTest, BatchedMatchesTheCpu) {
  Pair a = random({6, 40, 64}, DType::Bf16, 8), b = random({6, 40, 64}, DType::Bf16, 9),
       c = zeros({6, 40, 40}, DType::F32);
  cpu().gemm_batched(a.cpu, false, b.cpu, true, c.cpu, 0.125f, 0.0f);
  gpu().gemm_batched(a.gpu, false, b.gpu, true, c.gpu, 0.125f, 0.0f);
  expect_close(c, 1e-5, 0.0, "c");
}

TEST_F(CudaGemmTest, AnEmptyProductWithBetaZeroOverwritesWhatCHeld) {
  // k = 0: c = beta * c, and beta 0 must clear even NaN, as BLAS does.
  Tensor a = gpu().empty({4, 0}, DType::F32), b = gpu().empty({0, 3}, DType::F32);
  Pair c = make(std::vector<float>(12, std::numeric_limits<float>::quiet_NaN()), {4, 3});
  gpu().gemm(a, false, b, false, c.gpu, 1.0f, 0.0f);
  EXPECT_EQ(tensor::to_floats(gpu(), c.gpu), std::vector<float>(12, 0.0f));
}

TEST_F(CudaGemmTest, RefusesShapesThatDoNotAgree) {
  Tensor a = gpu().empty({4, 5}, DType::F32), b = gpu().empty({6, 7}, DType::F32),
         c = gpu().empty({4, 7}, DType::F32);
  EXPECT_THROW(gpu().gemm(a, false, b, false, c, 1.0f, 0.0f), std::logic_error);
}

TEST_F(CudaGemmTest, StepsAfterTheFirstReserveNoNewMemory) {
  // The caching allocator: the same sequence of tensors again is served from the pool.
  auto step = [&] {
    Tensor x = gpu().empty({512, 1024}, DType::Bf16), w = gpu().empty({1024, 1024}, DType::Bf16);
    gpu().fill(x, 0.5);
    gpu().fill(w, 0.25);
    Tensor y = gpu().empty({512, 1024}, DType::F32);
    gpu().gemm(x, false, w, true, y, 1.0f, 0.0f);
    gpu().synchronize();
  };
  step();
  const int64_t reserved = gpu().reserved_high_bytes();
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(gpu().reserved_high_bytes(), reserved);
  EXPECT_EQ(gpu().memory().allocated_bytes, 0);
}

}  // namespace gemm_test
}  // namespace megatron::test_support
