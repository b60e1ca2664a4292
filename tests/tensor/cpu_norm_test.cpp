// CpuBackend's layer norm and RMS norm: forward against double-precision formulas, every
// gradient against finite differences, and parameter gradients independent of the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/scoped_threads.hpp"

namespace megatron::tensor {
namespace cpu_norm_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

using test_support::ScopedThreads;

constexpr float kEps = 1e-5f;

class CpuNormTest : public ::testing::Test {
 protected:
  CpuBackend backend;

  Tensor make(const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32) {
    return from_floats(backend, values, shape, dtype);
  }
  std::vector<float> values(const Tensor& t) { return to_floats(backend, t); }

  struct LayerNormOut {
    std::vector<float> y, mean, rstd;
  };
  LayerNormOut layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                          const std::vector<float>& beta, int64_t n, int64_t c) {
    Tensor y = backend.empty({n, c}, DType::F32), mean = backend.empty({n}, DType::F32),
           rstd = backend.empty({n}, DType::F32);
    backend.layer_norm_forward(make(x, {n, c}), make(gamma, {c}), make(beta, {c}), kEps, y, mean,
                               rstd);
    return {values(y), values(mean), values(rstd)};
  }

  struct LayerNormGrads {
    std::vector<float> dx, dgamma, dbeta;
  };
  // Backward from the forward's own statistics, into parameter gradients starting at zero.
  LayerNormGrads layer_norm_grads(const std::vector<float>& dy, const std::vector<float>& x,
                                  const std::vector<float>& gamma, int64_t n, int64_t c) {
    const std::vector<float> beta(c, 0.0f);
    const LayerNormOut forward = layer_norm(x, gamma, beta, n, c);
    Tensor dx = backend.empty({n, c}, DType::F32), dgamma = backend.zeros({c}, DType::F32),
           dbeta = backend.zeros({c}, DType::F32);
    backend.layer_norm_backward(make(dy, {n, c}), make(x, {n, c}), make(gamma, {c}),
                                make(forward.mean, {n}), make(forward.rstd, {n}), dx, dgamma,
                                dbeta);
    return {values(dx), values(dgamma), values(dbeta)};
  }

  std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              int64_t n, int64_t c, std::vector<float>* rstd_out = nullptr) {
    Tensor y = backend.empty({n, c}, DType::F32), rstd = backend.empty({n}, DType::F32);
    backend.rms_norm_forward(make(x, {n, c}), make(gamma, {c}), kEps, y, rstd);
    if (rstd_out) *rstd_out = values(rstd);
    return values(y);
  }

  struct RmsNormGrads {
    std::vector<float> dx, dgamma;
  };
  RmsNormGrads rms_norm_grads(const std::vector<float>& dy, const std::vector<float>& x,
                              const std::vector<float>& gamma, int64_t n, int64_t c) {
    std::vector<float> rstd;
    rms_norm(x, gamma, n, c, &rstd);
    Tensor dx = backend.empty({n, c}, DType::F32), dgamma = backend.zeros({c}, DType::F32);
    backend.rms_norm_backward(make(dy, {n, c}), make(x, {n, c}), make(gamma, {c}), make(rstd, {n}),
                              dx, dgamma);
    return {values(dx), values(dgamma)};
  }
};

// Rows of x with a nonzero mean, so centring matters.
std::vector<float> shifted_rows(int64_t n, int64_t c, uint32_t seed) {
  auto x = random_values(n * c, seed, 2.0f);
  for (int64_t i = 0; i < n * c; ++i) x[i] += 0.5f * static_cast<float>(i / c);
  return x;
}

// --- layer norm -------------------------------------------------------------------------------

TEST_F(CpuNormTest, LayerNormNormalisesEachRowThenAppliesGammaAndBeta) {
  const int64_t n = 5, c = 300;
  const auto x = shifted_rows(n, c, 1), gamma = random_values(c, 2), beta = random_values(c, 3);
  const LayerNormOut out = layer_norm(x, gamma, beta, n, c);
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += x[i * c + j];
    mean /= c;
    for (int64_t j = 0; j < c; ++j) var += (x[i * c + j] - mean) * (x[i * c + j] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + kEps);
    // f32 sums over 300 values: relative error ~1e-6.
    EXPECT_NEAR(out.mean[i], mean, 1e-5 * (1.0 + std::abs(mean))) << i;
    EXPECT_NEAR(out.rstd[i], rstd, 1e-5 * rstd) << i;
    for (int64_t j = 0; j < c; ++j) {
      const double want = (x[i * c + j] - mean) * rstd * gamma[j] + beta[j];
      ASSERT_NEAR(out.y[i * c + j], want, 1e-5 * (1.0 + std::abs(want))) << i << ", " << j;
    }
  }
}

TEST_F(CpuNormTest, LayerNormOfBf16InputWritesBf16Output) {
  const int64_t n = 3, c = 64;
  const auto x = values(make(shifted_rows(n, c, 4), {n * c}, DType::Bf16));
  const std::vector<float> gamma(c, 1.0f), beta(c, 0.0f);
  Tensor y = backend.empty({n, c}, DType::Bf16), mean = backend.empty({n}, DType::F32),
         rstd = backend.empty({n}, DType::F32);
  backend.layer_norm_forward(make(x, {n, c}, DType::Bf16), make(gamma, {c}, DType::Bf16),
                             make(beta, {c}), kEps, y, mean, rstd);
  const auto got = values(y);
  const LayerNormOut want = layer_norm(x, gamma, beta, n, c);
  // One bf16 rounding of an f32 result: 2^-9 relative, 2^-8 allowed.
  for (int64_t i = 0; i < n * c; ++i) {
    ASSERT_NEAR(got[i], want.y[i], std::abs(want.y[i]) / 256 + 1e-6) << i;
  }
}

TEST_F(CpuNormTest, LayerNormBackwardDxMatchesNumericGradient) {
  const int64_t n = 4, c = 8;
  const auto x = shifted_rows(n, c, 5), gamma = random_values(c, 6), beta = random_values(c, 7);
  const auto w = random_values(n * c, 8);
  const auto forward = [&](const std::vector<float>& v) {
    return layer_norm(v, gamma, beta, n, c).y;
  };
  expect_gradient_near(layer_norm_grads(w, x, gamma, n, c).dx, numeric_gradient(x, forward, w),
                       2e-3, 1e-5, "dx");
}

TEST_F(CpuNormTest, LayerNormBackwardDgammaMatchesNumericGradient) {
  const int64_t n = 4, c = 8;
  const auto x = shifted_rows(n, c, 9), gamma = random_values(c, 10), beta = random_values(c, 11);
  const auto w = random_values(n * c, 12);
  const auto forward = [&](const std::vector<float>& g) { return layer_norm(x, g, beta, n, c).y; };
  expect_gradient_near(layer_norm_grads(w, x, gamma, n, c).dgamma,
                       numeric_gradient(gamma, forward, w), 2e-3, 1e-5, "dgamma");
}

TEST_F(CpuNormTest, LayerNormBackwardDbetaMatchesNumericGradient) {
  const int64_t n = 4, c = 8;
  const auto x = shifted_rows(n, c, 13), gamma = random_values(c, 14), beta = random_values(c, 15);
  const auto w = random_values(n * c, 16);
  const auto forward = [&](const std::vector<float>& b) { return layer_norm(x, gamma, b, n, c).y; };
  expect_gradient_near(layer_norm_grads(w, x, gamma, n, c).dbeta,
                       numeric_gradient(beta, forward, w), 2e-3, 1e-5, "dbeta");
}

TEST_F(CpuNormTest, LayerNormBackwardAccumulatesIntoDgammaAndDbetaButOverwritesDx) {
  const int64_t n = 3, c = 6;
  const auto x = shifted_rows(n, c, 17), gamma = random_values(c, 18),
             dy = random_values(n * c, 19);
  const LayerNormGrads fresh = layer_norm_grads(dy, x, gamma, n, c);
  const LayerNormOut forward = layer_norm(x, gamma, std::vector<float>(c, 0.0f), n, c);
  Tensor dx = make(std::vector<float>(n * c, 100.0f), {n, c});
  Tensor dgamma = make(std::vector<float>(c, 1.0f), {c}),
         dbeta = make(std::vector<float>(c, 2.0f), {c});
  backend.layer_norm_backward(make(dy, {n, c}), make(x, {n, c}), make(gamma, {c}),
                              make(forward.mean, {n}), make(forward.rstd, {n}), dx, dgamma, dbeta);
  EXPECT_EQ(values(dx), fresh.dx);
  const auto dg = values(dgamma), db = values(dbeta);
  for (int64_t j = 0; j < c; ++j) {
    EXPECT_FLOAT_EQ(dg[j], 1.0f + fresh.dgamma[j]) << j;
    EXPECT_FLOAT_EQ(db[j], 2.0f + fresh.dbeta[j]) << j;
  }
}

// Enough rows for many row blocks, and the run repeated on one, two and three threads (an
// uneven split of the blocks).
TEST_F(CpuNormTest, LayerNormBackwardIsBitwiseIndependentOfThreadCount) {
  const int64_t n = 2051, c = 96;
  const auto x = shifted_rows(n, c, 20), gamma = random_values(c, 21),
             dy = random_values(n * c, 22);
  LayerNormGrads results[3];
  for (int threads : {1, 2, 3}) {
    ScopedThreads scope(threads);
    results[threads - 1] = layer_norm_grads(dy, x, gamma, n, c);
  }
  for (int i : {1, 2}) {
    EXPECT_EQ(results[0].dx, results[i].dx) << i + 1 << " threads";
    EXPECT_EQ(results[0].dgamma, results[i].dgamma) << i + 1 << " threads";
    EXPECT_EQ(results[0].dbeta, results[i].dbeta) << i + 1 << " threads";
  }
}

TEST_F(CpuNormTest, LayerNormRejectsStatisticsOfTheWrongLength) {
  Tensor y = backend.empty({4, 8}, DType::F32), mean = backend.empty({3}, DType::F32),
         rstd = backend.empty({4}, DType::F32);
  const Tensor x = backend.zeros({4, 8}, DType::F32), gamma = backend.zeros({8}, DType::F32);
  EXPECT_THROW(backend.layer_norm_forward(x, gamma, gamma, kEps, y, mean, rstd), std::logic_error);
}

// The q/k norm's inputs are checked as the row norms' are: a shape whose heads the groups do not
// divide, qkv that is not whole rows, a gamma, statistic or gradient of the wrong size.
TEST_F(CpuNormTest, QkNormRejectsShapesAndSizesThatDoNotFit) {
  const tensor::AttentionShape shape{.batch = 2, .seq = 1, .heads = 4, .groups = 2, .head_dim = 4};
  const Tensor qkv = backend.zeros({2, 32}, DType::F32), gamma = backend.zeros({4}, DType::F32);
  Tensor out = backend.empty({2, 32}, DType::F32), rstd = backend.empty({12}, DType::F32);
  backend.qk_norm_forward(qkv, shape, gamma, gamma, kEps, out, rstd);  // fits
  tensor::AttentionShape odd = shape;
  odd.groups = 3;
  EXPECT_THROW(backend.qk_norm_forward(qkv, odd, gamma, gamma, kEps, out, rstd), std::logic_error);
  const Tensor ragged = backend.zeros({2, 31}, DType::F32);
  EXPECT_THROW(backend.qk_norm_forward(ragged, shape, gamma, gamma, kEps, out, rstd), std::logic_error);
  const Tensor wide = backend.zeros({5}, DType::F32);
  EXPECT_THROW(backend.qk_norm_forward(qkv, shape, gamma, wide, kEps, out, rstd), std::logic_error);
  Tensor short_rstd = backend.empty({8}, DType::F32);
  EXPECT_THROW(backend.qk_norm_forward(qkv, shape, gamma, gamma, kEps, out, short_rstd), std::logic_error);
  Tensor dqkv = backend.empty({2, 32}, DType::F32), dq = backend.zeros({4}, DType::F32);
  Tensor half_grad = backend.zeros({4}, DType::Bf16);
  EXPECT_THROW(backend.qk_norm_backward(qkv, qkv, shape, gamma, gamma, rstd, dqkv, dq, half_grad),
               std::logic_error);
}

TEST_F(CpuNormTest, LayerNormRejectsAGammaOfTheWrongLength) {
  Tensor y = backend.empty({4, 8}, DType::F32), mean = backend.empty({4}, DType::F32),
         rstd = backend.empty({4}, DType::F32);
  const Tensor x = backend.zeros({4, 8}, DType::F32), gamma = backend.zeros({7}, DType::F32);
  EXPECT_THROW(backend.layer_norm_forward(x, gamma, gamma, kEps, y, mean, rstd), std::logic_error);
}

// --- RMS norm -----------------------------------------------------------------------------------

TEST_F(CpuNormTest, RmsNormDividesEachRowByItsRootMeanSquareThenAppliesGamma) {
  const int64_t n = 4, c = 250;
  const auto x = shifted_rows(n, c, 23), gamma = random_values(c, 24);
  std::vector<float> rstd;
  const auto y = rms_norm(x, gamma, n, c, &rstd);
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0.0;
    for (int64_t j = 0; j < c; ++j) ms += double(x[i * c + j]) * x[i * c + j];
    const double want_rstd = 1.0 / std::sqrt(ms / c + kEps);
    // f32 sum of 250 squares: relative error ~1e-6.
    EXPECT_NEAR(rstd[i], want_rstd, 1e-5 * want_rstd) << i;
    for (int64_t j = 0; j < c; ++j) {
      const double want = x[i * c + j] * want_rstd * gamma[j];
      ASSERT_NEAR(y[i * c + j], want, 1e-5 * (1.0 + std::abs(want))) << i << ", " << j;
    }
  }
}

TEST_F(CpuNormTest, RmsNormBackwardDxMatchesNumericGradient) {
  const int64_t n = 4, c = 8;
  const auto x = shifted_rows(n, c, 25), gamma = random_values(c, 26), w = random_values(n * c, 27);
  const auto forward = [&](const std::vector<float>& v) { return rms_norm(v, gamma, n, c); };
  expect_gradient_near(rms_norm_grads(w, x, gamma, n, c).dx, numeric_gradient(x, forward, w), 2e-3,
                       1e-5, "dx");
}

TEST_F(CpuNormTest, RmsNormBackwardDgammaMatchesNumericGradient) {
  const int64_t n = 4, c = 8;
  const auto x = shifted_rows(n, c, 28), gamma = random_values(c, 29), w = random_values(n * c, 30);
  const auto forward = [&](const std::vector<float>& g) { return rms_norm(x, g, n, c); };
  expect_gradient_near(rms_norm_grads(w, x, gamma, n, c).dgamma,
                       numeric_gradient(gamma, forward, w), 2e-3, 1e-5, "dgamma");
}

TEST_F(CpuNormTest, RmsNormBackwardAccumulatesIntoDgamma) {
  const int64_t n = 3, c = 5;
  const auto x = shifted_rows(n, c, 31), gamma = random_values(c, 32),
             dy = random_values(n * c, 33);
  const RmsNormGrads fresh = rms_norm_grads(dy, x, gamma, n, c);
  std::vector<float> rstd;
  rms_norm(x, gamma, n, c, &rstd);
  Tensor dx = backend.empty({n, c}, DType::F32);
  Tensor dgamma = make(std::vector<float>(c, -1.0f), {c});
  backend.rms_norm_backward(make(dy, {n, c}), make(x, {n, c}), make(gamma, {c}), make(rstd, {n}),
                            dx, dgamma);
  const auto dg = values(dgamma);
  for (int64_t j = 0; j < c; ++j) EXPECT_FLOAT_EQ(dg[j], -1.0f + fresh.dgamma[j]) << j;
}

TEST_F(CpuNormTest, RmsNormBackwardIsBitwiseIndependentOfThreadCount) {
  const int64_t n = 2051, c = 96;
  const auto x = shifted_rows(n, c, 34), gamma = random_values(c, 35),
             dy = random_values(n * c, 36);
  RmsNormGrads results[3];
  for (int threads : {1, 2, 3}) {
    ScopedThreads scope(threads);
    results[threads - 1] = rms_norm_grads(dy, x, gamma, n, c);
  }
  for (int i : {1, 2}) {
    EXPECT_EQ(results[0].dx, results[i].dx) << i + 1 << " threads";
    EXPECT_EQ(results[0].dgamma, results[i].dgamma) << i + 1 << " threads";
  }
}

TEST_F(CpuNormTest, NormBackwardRejectsA16BitParameterGradient) {
  const Tensor x = backend.zeros({2, 4}, DType::F32), gamma = backend.zeros({4}, DType::F32),
               rstd = backend.zeros({2}, DType::F32);
  Tensor dx = backend.empty({2, 4}, DType::F32), dgamma = backend.zeros({4}, DType::Bf16);
  EXPECT_THROW(backend.rms_norm_backward(x, x, gamma, rstd, dx, dgamma), std::logic_error);
}

}  // namespace cpu_norm_test
}  // namespace megatron::tensor
