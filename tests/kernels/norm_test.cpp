// The CUDA layer norm and RMS norm against the CPU backend: each dtype, odd row widths, wide rows
// and many rows, parameter gradients accumulated onto non-zero values, the same bits every run.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace norm_test {

constexpr float kEps = 1e-5f;
constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};

// Statistics and parameter gradients are f32 sums formed in another order (lanes, blocks of
// rows) than the CPU's: within f32 rounding of the largest value, as tolerance_for(F32) allows.
constexpr double kF32 = tolerance_for(DType::F32);

class CudaNormTest : public CudaOpTest {
 protected:
  // n rows of c with a mean that differs from row to row, so that centring matters.
  Pair rows(int64_t n, int64_t c, DType dtype, uint32_t seed) {
    std::vector<float> x = random_floats(size_t(n * c), seed, 2.0f);
    for (int64_t i = 0; i < n * c; ++i) x[size_t(i)] += 0.25f * float(i / c % 7);
    return make(x, {n, c}, dtype);
  }

  struct Statistics {
    Pair mean, rstd;
  };
  // The CPU's forward statistics of x on both backends, for a backward.
  Statistics statistics(const Pair& x, const Pair& gamma, bool rms) {
    const int64_t c = x.cpu.dim(-1), n = x.cpu.numel() / c;
    Tensor y = cpu().empty({n, c}, DType::F32), mean = cpu().empty({n}, DType::F32),
           rstd = cpu().empty({n}, DType::F32);
    if (rms) {
      cpu().rms_norm_forward(x.cpu, gamma.cpu, kEps, y, rstd);
    } else {
      const Tensor beta = cpu().zeros({c}, DType::F32);
      cpu().layer_norm_forward(x.cpu, gamma.cpu, beta, kEps, y, mean, rstd);
    }
    return {make(tensor::to_floats(cpu(), mean), {n}), make(tensor::to_floats(cpu(), rstd), {n})};
  }

  void check_layer_norm_forward(int64_t n, int64_t c, DType x_dtype, DType y_dtype,
                                DType param_dtype) {
    const Pair x = rows(n, c, x_dtype, 1), gamma = random({c}, param_dtype, 2),
               beta = random({c}, param_dtype, 3);
    Pair y = empty({n, c}, y_dtype), mean = empty({n}, DType::F32), rstd = empty({n}, DType::F32);
    cpu().layer_norm_forward(x.cpu, gamma.cpu, beta.cpu, kEps, y.cpu, mean.cpu, rstd.cpu);
    gpu().layer_norm_forward(x.gpu, gamma.gpu, beta.gpu, kEps, y.gpu, mean.gpu, rstd.gpu);
    expect_close(y, tolerance_for(y_dtype), 0.0, "y");
    expect_close(mean, kF32, 0.0, "mean");
    expect_close(rstd, kF32, 0.0, "rstd");
  }

  void check_rms_norm_forward(int64_t n, int64_t c, DType x_dtype, DType y_dtype) {
    const Pair x = rows(n, c, x_dtype, 4), gamma = random({c}, DType::F32, 5);
    Pair y = empty({n, c}, y_dtype), rstd = empty({n}, DType::F32);
    cpu().rms_norm_forward(x.cpu, gamma.cpu, kEps, y.cpu, rstd.cpu);
    gpu().rms_norm_forward(x.gpu, gamma.gpu, kEps, y.gpu, rstd.gpu);
    expect_close(y, tolerance_for(y_dtype), 0.0, "y");
    expect_close(rstd, kF32, 0.0, "rstd");
  }

  // dx in `dtype` (as x and dy); dgamma and dbeta start from non-zero values.
  void check_layer_norm_backward(int64_t n, int64_t c, DType dtype) {
    const Pair x = rows(n, c, dtype, 6), dy = random({n, c}, dtype, 7),
               gamma = random({c}, DType::F32, 8);
    const Statistics s = statistics(x, gamma, false);
    Pair dx = empty({n, c}, dtype), dgamma = random({c}, DType::F32, 9),
         dbeta = random({c}, DType::F32, 10);
    cpu().layer_norm_backward(dy.cpu, x.cpu, gamma.cpu, s.mean.cpu, s.rstd.cpu, dx.cpu,
                              dgamma.cpu, dbeta.cpu);
    gpu().layer_norm_backward(dy.gpu, x.gpu, gamma.gpu, s.mean.gpu, s.rstd.gpu, dx.gpu,
                              dgamma.gpu, dbeta.gpu);
    expect_close(dx, tolerance_for(dtype), 0.0, "dx");
    expect_close(dgamma, kF32, 0.0, "dgamma");
    expect_close(dbeta, kF32, 0.0, "dbeta");
  }

  void check_rms_norm_backward(int64_t n, int64_t c, DType dtype) {
    const Pair x = rows(n, c, dtype, 11), dy = random({n, c}, dtype, 12),
               gamma = random({c}, DType::F32, 13);
    const Statistics s = statistics(x, gamma, true);
    Pair dx = empty({n, c}, dtype), dgamma = random({c}, DType::F32, 14);
    cpu().rms_norm_backward(dy.cpu, x.cpu, gamma.cpu, s.rstd.cpu, dx.cpu, dgamma.cpu);
    gpu().rms_norm_backward(dy.gpu, x.gpu, gamma.gpu, s.rstd.gpu, dx.gpu, dgamma.gpu);
    expect_close(dx, tolerance_for(dtype), 0.0, "dx");
    expect_close(dgamma, kF32, 0.0, "dgamma");
  }

  std::vector<float> values(const Tensor& t) { return tensor::to_floats(gpu(), t); }
};

// --- layer norm -------------------------------------------------------------------------------

// 771 columns: no row of a 16-bit tensor starts 16-byte aligned like the one before it.
TEST_F(CudaNormTest, LayerNormForwardMatchesTheCpuForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_layer_norm_forward(37, 771, dtype, dtype, DType::F32);
  }
}

TEST_F(CudaNormTest, LayerNormForwardTakesEachTensorInItsOwnDtype) {
  check_layer_norm_forward(13, 771, DType::Bf16, DType::F32, DType::F16);
  check_layer_norm_forward(13, 300, DType::F32, DType::F16, DType::Bf16);
}

TEST_F(CudaNormTest, LayerNormForwardOfAlignedRowsMatchesTheCpu) {
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_layer_norm_forward(9, 4096, dtype, dtype, dtype);
  }
}

// More than a block's registers hold (1024 threads of 2 slots of 8): the rest is read again.
TEST_F(CudaNormTest, LayerNormForwardOfRowsWiderThanABlockHoldsMatchesTheCpu) {
  check_layer_norm_forward(3, 20000, DType::F32, DType::F32, DType::F32);
  check_layer_norm_forward(3, 20001, DType::Bf16, DType::Bf16, DType::F32);
}

TEST_F(CudaNormTest, LayerNormForwardOfOneElementRowsMatchesTheCpu) {
  check_layer_norm_forward(5, 1, DType::F32, DType::F32, DType::F32);
}

TEST_F(CudaNormTest, LayerNormBackwardMatchesTheCpuAndAccumulatesForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_layer_norm_backward(37, 771, dtype);
  }
}

// Hundreds of blocks of several rows each, whose partial sums add up in block order.
TEST_F(CudaNormTest, LayerNormBackwardOverManyRowsMatchesTheCpu) {
  check_layer_norm_backward(2053, 771, DType::F32);
  check_layer_norm_backward(4096, 64, DType::Bf16);
}

// 8000 columns: partial sums in more shared memory than the default 48 KiB; 30000: more than a
// block may have at all, so in the workspace instead (and rows wider than the registers hold).
TEST_F(CudaNormTest, LayerNormBackwardOfWideRowsMatchesTheCpu) {
  check_layer_norm_backward(6, 8000, DType::F32);
  check_layer_norm_backward(5, 30000, DType::F32);
  check_layer_norm_backward(5, 30001, DType::Bf16);
}

TEST_F(CudaNormTest, LayerNormBackwardOfAlignedRowsMatchesTheCpu) {
  check_layer_norm_backward(33, 4096, DType::Bf16);
}

TEST_F(CudaNormTest, LayerNormBackwardGivesTheSameBitsEveryRun) {
  const int64_t n = 1000, c = 771;
  const Pair x = rows(n, c, DType::Bf16, 15), dy = random({n, c}, DType::Bf16, 16),
             gamma = random({c}, DType::F32, 17);
  const Statistics s = statistics(x, gamma, false);
  const std::vector<float> start = random_floats(size_t(c), 18);
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 2; ++run) {
    Tensor dx = gpu().empty({n, c}, DType::Bf16);
    Tensor dgamma = tensor::from_floats(gpu(), start, {c});
    Tensor dbeta = tensor::from_floats(gpu(), start, {c});
    gpu().layer_norm_backward(dy.gpu, x.gpu, gamma.gpu, s.mean.gpu, s.rstd.gpu, dx, dgamma,
                              dbeta);
    results.push_back(values(dx));
    results.push_back(values(dgamma));
    results.push_back(values(dbeta));
  }
  EXPECT_EQ(results[0], results[3]) << "dx";
  EXPECT_EQ(results[1], results[4]) << "dgamma";
  EXPECT_EQ(results[2], results[5]) << "dbeta";
}

TEST_F(CudaNormTest, LayerNormRejectsGammaOfAnotherWidth) {
  const Pair x = rows(4, 10, DType::F32, 19), gamma = random({11}, DType::F32, 20),
             beta = random({10}, DType::F32, 21);
  Pair y = empty({4, 10}, DType::F32), mean = empty({4}, DType::F32), rstd = empty({4}, DType::F32);
  EXPECT_THROW(gpu().layer_norm_forward(x.gpu, gamma.gpu, beta.gpu, kEps, y.gpu, mean.gpu,
                                        rstd.gpu),
               std::logic_error);
}

TEST_F(CudaNormTest, LayerNormBackwardRejectsParameterGradientsThatAreNotF32) {
  const Pair x = rows(4, 10, DType::F32, 22), dy = random({4, 10}, DType::F32, 23),
             gamma = random({10}, DType::F32, 24);
  const Statistics s = statistics(x, gamma, false);
  Pair dx = empty({4, 10}, DType::F32), dgamma = zeros({10}, DType::Bf16),
       dbeta = zeros({10}, DType::F32);
  EXPECT_THROW(gpu().layer_norm_backward(dy.gpu, x.gpu, gamma.gpu, s.mean.gpu, s.rstd.gpu, dx.gpu,
                                         dgamma.gpu, dbeta.gpu),
               std::logic_error);
}

// --- RMS norm ---------------------------------------------------------------------------------

TEST_F(CudaNormTest, RmsNormForwardMatchesTheCpuForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_rms_norm_forward(37, 771, dtype, dtype);
  }
}

TEST_F(CudaNormTest, RmsNormForwardOfAlignedAndWideRowsMatchesTheCpu) {
  check_rms_norm_forward(9, 4096, DType::Bf16, DType::Bf16);
  check_rms_norm_forward(3, 20000, DType::F32, DType::Bf16);
}

TEST_F(CudaNormTest, RmsNormBackwardMatchesTheCpuAndAccumulatesForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_rms_norm_backward(37, 771, dtype);
  }
}

TEST_F(CudaNormTest, RmsNormBackwardOverManyAndWideRowsMatchesTheCpu) {
  check_rms_norm_backward(2053, 771, DType::F32);
  check_rms_norm_backward(9, 4096, DType::Bf16);
  check_rms_norm_backward(4, 60000, DType::F32);
}

TEST_F(CudaNormTest, RmsNormBackwardGivesTheSameBitsEveryRun) {
  const int64_t n = 1000, c = 771;
  const Pair x = rows(n, c, DType::F32, 25), dy = random({n, c}, DType::F32, 26),
             gamma = random({c}, DType::F32, 27);
  const Statistics s = statistics(x, gamma, true);
  const std::vector<float> start = random_floats(size_t(c), 28);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Tensor dx = gpu().empty({n, c}, DType::F32);
    Tensor dgamma = tensor::from_floats(gpu(), start, {c});
    gpu().rms_norm_backward(dy.gpu, x.gpu, gamma.gpu, s.rstd.gpu, dx, dgamma);
    if (run == 0) {
      first = values(dgamma);
    } else {
      EXPECT_EQ(values(dgamma), first);
    }
  }
}

}  // namespace norm_test
}  // namespace megatron::test_support
