// CpuBackend's elementwise ops, bias add/grad, GELU, SwiGLU and dropout: forward values against
// double-precision formulas, every backward against finite differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/scoped_threads.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace cpu_elementwise_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

using test_support::ScopedThreads;

class CpuElementwiseTest : public ::testing::Test {
 protected:
  CpuBackend backend;

  Tensor make(const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32) {
    return from_floats(backend, values, shape, dtype);
  }
  std::vector<float> values(const Tensor& t) { return to_floats(backend, t); }
  // values as they are after rounding to dtype.
  std::vector<float> rounded(const std::vector<float>& v, DType dtype) {
    return values(make(v, {static_cast<int64_t>(v.size())}, dtype));
  }
};

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// --- arithmetic -------------------------------------------------------------------------------

TEST_F(CpuElementwiseTest, AddSumsElementwiseAcrossDtypes) {
  const auto a = rounded(random_values(5000, 1), DType::Bf16), b = random_values(5000, 2);
  Tensor out = backend.empty({5000}, DType::F32);
  backend.add(make(a, {5000}, DType::Bf16), make(b, {5000}), out);
  const auto got = values(out);
  // Both addends are exact f32 values, so f32 addition is correctly rounded: exactly a + b.
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

TEST_F(CpuElementwiseTest, AddMayWriteIntoOneOfItsInputs) {
  const auto a = random_values(40000, 3), b = random_values(40000, 4);
  Tensor ta = make(a, {200, 200}), tb = make(b, {200, 200});
  backend.add(ta, tb, ta);
  const auto got = values(ta);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

TEST_F(CpuElementwiseTest, AddRejectsTensorsOfDifferentSizes) {
  Tensor out = backend.zeros({4}, DType::F32);
  EXPECT_THROW(backend.add(backend.zeros({4}, DType::F32), backend.zeros({5}, DType::F32), out),
               std::logic_error);
}

TEST_F(CpuElementwiseTest, AxpyAddsAlphaTimesXToY) {
  const auto x = random_values(3000, 5), y = random_values(3000, 6);
  Tensor ty = make(y, {3000});
  backend.axpy(-0.5f, make(x, {3000}), ty);
  const auto got = values(ty);
  // -0.5 x is exact in f32, so only the addition rounds (fused or not): within half an ulp of
  // the exact result.
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = double(y[i]) - 0.5 * double(x[i]);
    ASSERT_NEAR(got[i], want, std::abs(want) * 0x1p-24 + 1e-30) << i;
  }
}

TEST_F(CpuElementwiseTest, ScaleMultipliesInPlaceAndRoundsToTheStorageDtype) {
  const auto x = rounded(random_values(3000, 7), DType::Bf16);
  Tensor t = make(x, {3000}, DType::Bf16);
  backend.scale(t, 3.0f);
  const auto got = values(t);
  const auto want = rounded(
      [&] {
        std::vector<float> v(x.size());
        for (size_t i = 0; i < x.size(); ++i) v[i] = 3.0f * x[i];
        return v;
      }(),
      DType::Bf16);
  EXPECT_EQ(got, want);
}

// --- bias ---------------------------------------------------------------------------------------

TEST_F(CpuElementwiseTest, BiasAddAddsTheBiasToEveryRow) {
  // Rows longer than the op's internal chunk, so a row is processed in pieces.
  const int64_t n = 3, c = 2500;
  const auto x = random_values(n * c, 8), bias = random_values(c, 9);
  Tensor tx = make(x, {n, 1, c});
  backend.bias_add(tx, make(bias, {c}));
  const auto got = values(tx);
  for (int64_t i = 0; i < n * c; ++i) ASSERT_EQ(got[i], x[i] + bias[i % c]) << i;
}

TEST_F(CpuElementwiseTest, BiasAddRejectsABiasOfTheWrongLength) {
  Tensor x = backend.zeros({4, 6}, DType::F32);
  EXPECT_THROW(backend.bias_add(x, backend.zeros({4}, DType::F32)), std::logic_error);
}

TEST_F(CpuElementwiseTest, BiasGradAccumulatesColumnSums) {
  const int64_t n = 50, c = 7;
  const auto dy = random_values(n * c, 10), initial = random_values(c, 11);
  Tensor dbias = make(initial, {c});
  backend.bias_grad(make(dy, {n, c}, DType::Bf16), dbias);
  const auto dy16 = rounded(dy, DType::Bf16);
  const auto got = values(dbias);
  for (int64_t j = 0; j < c; ++j) {
    double want = initial[j];
    for (int64_t i = 0; i < n; ++i) want += dy16[i * c + j];
    // 50 f32 additions of values of size ~1: rounding error well below 1e-5.
    EXPECT_NEAR(got[j], want, 1e-5) << j;
  }
}

TEST_F(CpuElementwiseTest, BiasGradMatchesNumericGradientOfBiasAdd) {
  const int64_t n = 6, c = 5;
  const auto x = random_values(n * c, 12), bias = random_values(c, 13),
             w = random_values(n * c, 14);
  const auto forward = [&](const std::vector<float>& b) {
    Tensor y = make(x, {n, c});
    backend.bias_add(y, make(b, {c}));
    return values(y);
  };
  Tensor dbias = backend.zeros({c}, DType::F32);
  backend.bias_grad(make(w, {n, c}), dbias);
  expect_gradient_near(values(dbias), numeric_gradient(bias, forward, w));
}

TEST_F(CpuElementwiseTest, BiasGradIsBitwiseIndependentOfThreadCount) {
  const int64_t n = 4099, c = 33;
  const Tensor dy = make(random_values(n * c, 15), {n, c});
  std::vector<float> results[3];
  for (int threads : {1, 2, 3}) {
    ScopedThreads scope(threads);
    Tensor dbias = backend.zeros({c}, DType::F32);
    backend.bias_grad(dy, dbias);
    results[threads - 1] = values(dbias);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// --- GELU ---------------------------------------------------------------------------------------

// Inputs over the range where GELU is non-trivial, and beyond.
std::vector<float> gelu_inputs() {
  std::vector<float> x;
  for (float v = -8.0f; v <= 8.0f; v += 0.01f) x.push_back(v);
  return x;
}

// erf is evaluated to within 1.5e-7 (Abramowitz & Stegun 7.1.26, as PyTorch's CPU kernel), so
// gelu within 0.75e-7 |x|; plus a few f32 roundings of the result.
TEST_F(CpuElementwiseTest, GeluErfMatchesTheExactFormula) {
  const auto x = gelu_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor y = backend.empty({n}, DType::F32);
  backend.gelu_forward(make(x, {n}), y, false);
  const auto got = values(y);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(got[i], gelu_erf(x[i]), 1e-6 * (1.0 + std::abs(x[i]))) << x[i];
  }
}

// x sigmoid(2u) is 0.5 x (1 + tanh u) rewritten; a few f32 roundings apart.
TEST_F(CpuElementwiseTest, GeluTanhMatchesTheTanhFormula) {
  const auto x = gelu_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor y = backend.empty({n}, DType::F32);
  backend.gelu_forward(make(x, {n}), y, true);
  const auto got = values(y);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(got[i], gelu_tanh(x[i]), 1e-6 * (1.0 + std::abs(x[i]))) << x[i];
  }
}

TEST_F(CpuElementwiseTest, GeluSaturatesToIdentityAndZeroForLargeInputs) {
  for (bool tanh_approx : {false, true}) {
    Tensor y = backend.empty({4}, DType::F32);
    backend.gelu_forward(make({-100.0f, -30.0f, 30.0f, 100.0f}, {4}), y, tanh_approx);
    const auto got = values(y);
    EXPECT_NEAR(got[0], 0.0f, 1e-30f);
    EXPECT_NEAR(got[1], 0.0f, 1e-30f);
    EXPECT_EQ(got[2], 30.0f);
    EXPECT_EQ(got[3], 100.0f);
  }
}

TEST_F(CpuElementwiseTest, GeluOfBf16InputWritesTheRoundedResult) {
  const auto x = rounded(random_values(1000, 16, 2.0f), DType::Bf16);
  Tensor y = backend.empty({1000}, DType::Bf16);
  backend.gelu_forward(make(x, {1000}, DType::Bf16), y, false);
  const auto got = values(y);
  // One bf16 rounding: within 2^-8 relative of the exact value (plus the f32 error above).
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(got[i], gelu_erf(x[i]), std::abs(gelu_erf(x[i])) / 256 + 1e-6) << x[i];
  }
}

void check_gelu_backward(CpuBackend& backend, bool tanh_approx) {
  const auto x = random_values(64, 17, 2.0f), w = random_values(64, 18);
  const auto forward = [&](const std::vector<float>& v) {
    Tensor y = backend.empty({64}, DType::F32);
    backend.gelu_forward(from_floats(backend, v, {64}), y, tanh_approx);
    return to_floats(backend, y);
  };
  Tensor dx = backend.empty({64}, DType::F32);
  backend.gelu_backward(from_floats(backend, w, {64}), from_floats(backend, x, {64}), dx,
                        tanh_approx);
  expect_gradient_near(to_floats(backend, dx), numeric_gradient(x, forward, w));
}

TEST_F(CpuElementwiseTest, GeluErfBackwardMatchesNumericGradient) {
  check_gelu_backward(backend, false);
}

TEST_F(CpuElementwiseTest, GeluTanhBackwardMatchesNumericGradient) {
  check_gelu_backward(backend, true);
}

// --- SwiGLU -------------------------------------------------------------------------------------

TEST_F(CpuElementwiseTest, SwigluIsSiluOfTheGateHalfTimesTheUpHalf) {
  // f wider than the op's internal chunk, so each half-row is processed in pieces.
  const int64_t n = 3, f = 2100;
  const auto x = random_values(n * 2 * f, 19, 3.0f);
  Tensor y = backend.empty({n, f}, DType::F32);
  backend.swiglu_forward(make(x, {n, 2 * f}), y);
  const auto got = values(y);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double gate = x[i * 2 * f + j], up = x[i * 2 * f + f + j];
      const double want = silu(gate) * up;
      // exp within 2 ulp, then a division and two products: ~1e-6 relative.
      ASSERT_NEAR(got[i * f + j], want, 2e-6 * (std::abs(want) + 1e-3)) << i << ", " << j;
    }
  }
}

TEST_F(CpuElementwiseTest, SwigluBackwardMatchesNumericGradient) {
  const int64_t n = 4, f = 6;
  const auto x = random_values(n * 2 * f, 20, 2.0f), w = random_values(n * f, 21);
  const auto forward = [&](const std::vector<float>& v) {
    Tensor y = backend.empty({n, f}, DType::F32);
    backend.swiglu_forward(make(v, {n, 2 * f}), y);
    return values(y);
  };
  Tensor dx = backend.empty({n, 2 * f}, DType::F32);
  backend.swiglu_backward(make(w, {n, f}), make(x, {n, 2 * f}), dx);
  expect_gradient_near(values(dx), numeric_gradient(x, forward, w));
}

// --- GeGLU --------------------------------------------------------------------------------------

TEST_F(CpuElementwiseTest, GegluIsTanhGeluOfTheGateHalfTimesTheUpHalf) {
  const int64_t n = 3, f = 2100;
  const auto x = random_values(n * 2 * f, 22, 3.0f);
  Tensor y = backend.empty({n, f}, DType::F32);
  backend.geglu_forward(make(x, {n, 2 * f}), y);
  const auto got = values(y);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double want = gelu_tanh(x[i * 2 * f + j]) * x[i * 2 * f + f + j];
      // gelu_tanh's own 1e-6 (its test above), times the up half.
      ASSERT_NEAR(got[i * f + j], want, 2e-6 * (std::abs(want) + 1e-3) + 1e-6) << i << ", " << j;
    }
  }
}

TEST_F(CpuElementwiseTest, GegluBackwardMatchesNumericGradient) {
  const int64_t n = 4, f = 6;
  const auto x = random_values(n * 2 * f, 23, 2.0f), w = random_values(n * f, 24);
  const auto forward = [&](const std::vector<float>& v) {
    Tensor y = backend.empty({n, f}, DType::F32);
    backend.geglu_forward(make(v, {n, 2 * f}), y);
    return values(y);
  };
  Tensor dx = backend.empty({n, 2 * f}, DType::F32);
  backend.geglu_backward(make(w, {n, f}), make(x, {n, 2 * f}), dx);
  expect_gradient_near(values(dx), numeric_gradient(x, forward, w));
}

TEST_F(CpuElementwiseTest, SwigluRejectsAnInputNotTwiceAsWideAsTheOutput) {
  Tensor y = backend.empty({4, 3}, DType::F32);
  EXPECT_THROW(backend.swiglu_forward(backend.zeros({4, 5}, DType::F32), y), std::logic_error);
}

// --- dropout ------------------------------------------------------------------------------------

constexpr RngKey kKey{.seed = 1234, .stream = 7};

TEST_F(CpuElementwiseTest, DropoutWithZeroProbabilityIsTheIdentity) {
  const auto x = rounded(random_values(1001, 22), DType::Bf16);
  Tensor y = backend.empty({1001}, DType::Bf16);
  backend.dropout_forward(make(x, {1001}, DType::Bf16), y, 0.0f, kKey);
  EXPECT_EQ(values(y), x);
}

// An odd size, so the last Philox block and the last chunk are partial.
TEST_F(CpuElementwiseTest, DropoutKeepsExactlyTheElementsWhoseUniformIsAtLeastP) {
  const int64_t n = 10007;
  const float p = 0.25f;
  const auto x = random_values(n, 23);
  Tensor y = backend.empty({n}, DType::F32);
  backend.dropout_forward(make(x, {n}), y, p, kKey);
  const auto got = values(y);
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = uniform_at(kKey, static_cast<uint64_t>(i)) >= p;
    ASSERT_EQ(got[i], keep ? x[i] * scale : 0.0f) << i;
  }
}

// A sequence-parallel shard keeps exactly the elements its rows keep in the whole tensor, for
// offsets on and off Philox block boundaries.
TEST_F(CpuElementwiseTest, DropoutOfAShardWithAnOffsetUsesTheWholeTensorsMask) {
  const int64_t n = 3001;
  const float p = 0.25f;
  const auto x = random_values(n, 29);
  for (const uint64_t offset : {uint64_t{128}, uint64_t{3}, uint64_t{4098}}) {
    RngKey key = kKey;
    key.offset = offset;
    Tensor y = backend.empty({n}, DType::F32);
    backend.dropout_forward(make(x, {n}), y, p, key);
    const auto got = values(y);
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = uniform_at(kKey, offset + static_cast<uint64_t>(i)) >= p;
      ASSERT_EQ(got[i], keep ? x[i] * (1.0f / (1.0f - p)) : 0.0f) << offset << " " << i;
    }
  }
}

// The boundary: an element is kept when its uniform equals p exactly.
TEST_F(CpuElementwiseTest, DropoutKeepsAnElementWhoseUniformEqualsP) {
  const float p = uniform_at(kKey, 5);
  Tensor ones = backend.empty({8}, DType::F32), y = backend.empty({8}, DType::F32);
  backend.fill(ones, 1.0);
  backend.dropout_forward(ones, y, p, kKey);
  EXPECT_EQ(values(y)[5], 1.0f / (1.0f - p));
}

TEST_F(CpuElementwiseTest, DropoutKeepsAboutOneMinusPOfALargeTensor) {
  const int64_t n = int64_t{1} << 20;
  const float p = 0.3f;
  Tensor y = backend.empty({n}, DType::F32);
  Tensor ones = backend.empty({n}, DType::F32);
  backend.fill(ones, 1.0);
  backend.dropout_forward(ones, y, p, kKey);
  const auto got = values(y);
  int64_t kept = 0;
  for (float v : got) kept += v != 0.0f;
  // Binomial standard deviation sqrt(p (1 - p) / n) = 4.5e-4; allow 6 of them.
  EXPECT_NEAR(double(kept) / double(n), 1.0 - p, 6 * std::sqrt(p * (1 - p) / n));
}

TEST_F(CpuElementwiseTest, DropoutScalesKeptElementsByOneOverOneMinusP) {
  const int64_t n = 4096;
  const float p = 0.5f;
  Tensor y = backend.empty({n}, DType::F32);
  Tensor ones = backend.empty({n}, DType::F32);
  backend.fill(ones, 1.0);
  backend.dropout_forward(ones, y, p, kKey);
  for (float v : values(y)) ASSERT_TRUE(v == 0.0f || v == 2.0f) << v;
}

TEST_F(CpuElementwiseTest, DropoutWithTheSameKeyDrawsTheSameMask) {
  const auto x = random_values(5000, 24);
  Tensor a = backend.empty({5000}, DType::F32), b = backend.empty({5000}, DType::F32);
  backend.dropout_forward(make(x, {5000}), a, 0.4f, kKey);
  backend.dropout_forward(make(x, {5000}), b, 0.4f, kKey);
  EXPECT_EQ(values(a), values(b));
}

TEST_F(CpuElementwiseTest, DropoutWithAnotherStreamDrawsAnotherMask) {
  const int64_t n = 5000;
  Tensor ones = backend.empty({n}, DType::F32);
  backend.fill(ones, 1.0);
  Tensor a = backend.empty({n}, DType::F32), b = backend.empty({n}, DType::F32);
  backend.dropout_forward(ones, a, 0.5f, kKey);
  backend.dropout_forward(ones, b, 0.5f, RngKey{.seed = kKey.seed, .stream = kKey.stream + 1});
  const auto va = values(a), vb = values(b);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += (va[i] != 0.0f) == (vb[i] != 0.0f);
  // Independent masks agree on half the elements (standard deviation 0.7%).
  EXPECT_NEAR(double(same) / n, 0.5, 0.05);
}

TEST_F(CpuElementwiseTest, DropoutWithProbabilityOneDropsEverything) {
  Tensor y = backend.empty({100}, DType::F32);
  backend.dropout_forward(make(random_values(100, 25), {100}), y, 1.0f, kKey);
  for (float v : values(y)) ASSERT_EQ(v, 0.0f);
}

TEST_F(CpuElementwiseTest, DropoutRejectsAProbabilityOutsideTheUnitInterval) {
  Tensor y = backend.empty({4}, DType::F32);
  EXPECT_THROW(backend.dropout_forward(backend.zeros({4}, DType::F32), y, 1.5f, kKey),
               std::logic_error);
  EXPECT_THROW(backend.dropout_forward(backend.zeros({4}, DType::F32), y, -0.1f, kKey),
               std::logic_error);
}

TEST_F(CpuElementwiseTest, DropoutBackwardAppliesTheForwardMask) {
  const int64_t n = 300;
  const float p = 0.3f;
  const auto x = random_values(n, 26), w = random_values(n, 27);
  const auto forward = [&](const std::vector<float>& v) {
    Tensor y = backend.empty({n}, DType::F32);
    backend.dropout_forward(make(v, {n}), y, p, kKey);
    return values(y);
  };
  Tensor dx = backend.empty({n}, DType::F32);
  backend.dropout_backward(make(w, {n}), dx, p, kKey);
  expect_gradient_near(values(dx), numeric_gradient(x, forward, w));
}

TEST_F(CpuElementwiseTest, DropoutAddAddsTheResidualToDroppedX) {
  const int64_t n = 3001;
  const float p = 0.2f;
  const auto x = random_values(n, 28), residual = random_values(n, 29);
  Tensor dropped = backend.empty({n}, DType::F32), out = backend.empty({n}, DType::F32);
  backend.dropout_forward(make(x, {n}), dropped, p, kKey);
  backend.dropout_add(make(x, {n}), make(residual, {n}), out, p, kKey);
  const auto d = values(dropped), got = values(out);
  // residual + x * scale may be computed with one rounding (a fused multiply-add) where the
  // reference rounds the product first: the two agree to within an f32 ulp of the terms.
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], residual[i] + d[i], 0x1p-23 * (std::abs(residual[i]) + std::abs(d[i])))
        << i;
  }
}

TEST_F(CpuElementwiseTest, DropoutAddWithZeroProbabilityIsAPlainSum) {
  const auto x = random_values(100, 30), residual = random_values(100, 31);
  Tensor out = backend.empty({100}, DType::F32);
  backend.dropout_add(make(x, {100}), make(residual, {100}), out, 0.0f, kKey);
  const auto got = values(out);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], residual[i] + x[i]) << i;
}

}  // namespace cpu_elementwise_test
}  // namespace megatron::tensor
