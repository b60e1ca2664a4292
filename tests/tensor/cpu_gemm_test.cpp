// CpuBackend::gemm and gemm_batched against a naive triple loop in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_gemm_test {

using test_support::random_values;

// A row-major [rows, cols] matrix as stored, with op() applied on access.
struct HostMatrix {
  const std::vector<float>& values;
  int64_t cols;  // of the stored matrix
  bool trans;
  double operator()(int64_t i, int64_t j) const {
    return trans ? values[static_cast<size_t>(j * cols + i)]
                 : values[static_cast<size_t>(i * cols + j)];
  }
};

// alpha op(a) op(b) + beta c for op(a) [m, k], op(b) [k, n], in double.
std::vector<double> reference(const HostMatrix& a, const HostMatrix& b, const std::vector<float>& c,
                              int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0.0;
      for (int64_t p = 0; p < k; ++p) dot += a(i, p) * b(p, j);
      const double previous = beta == 0.0 ? 0.0 : beta * c[static_cast<size_t>(i * n + j)];
      out[static_cast<size_t>(i * n + j)] = alpha * dot + previous;
    }
  }
  return out;
}

// |got - want| <= tolerance * (sum over p of |a_ip b_pj| + |beta c_ij|) for every element: the
// error bound of a sum of products scales with the sum of the magnitudes, not with the result.
void expect_near_product(const std::vector<float>& got, const std::vector<double>& want,
                         const HostMatrix& a, const HostMatrix& b, const std::vector<float>& c,
                         int64_t n, int64_t k, double alpha, double beta, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t idx = 0; idx < got.size(); ++idx) {
    const int64_t i = static_cast<int64_t>(idx) / n, j = static_cast<int64_t>(idx) % n;
    double magnitude = std::abs(beta * c[idx]);
    for (int64_t p = 0; p < k; ++p) magnitude += std::abs(alpha * a(i, p) * b(p, j));
    if (std::abs(got[idx] - want[idx]) > tolerance * (magnitude + 1e-30) && failures++ < 5) {
      ADD_FAILURE() << "c[" << i << ", " << j << "] = " << got[idx] << ", want " << want[idx];
    }
  }
  EXPECT_EQ(failures, 0);
}

// f32 sgemm over k terms: each partial sum is rounded once, so the error is at most about
// k * 2^-24 of the magnitude; 1e-5 covers k up to ~150 with room for blocked summation orders.
constexpr double kF32Tolerance = 1e-5;

struct Case {
  bool trans_a, trans_b;
};

class CpuGemmTest : public ::testing::Test {
 protected:
  CpuBackend backend;

  // Runs gemm on fresh tensors and returns c; a is stored [m, k] or [k, m] per trans_a.
  std::vector<float> run(const std::vector<float>& a, bool trans_a, const std::vector<float>& b,
                         bool trans_b, const std::vector<float>& c, int64_t m, int64_t n, int64_t k,
                         float alpha, float beta, DType in = DType::F32, DType out = DType::F32) {
    const Tensor ta = from_floats(backend, a, trans_a ? Shape{k, m} : Shape{m, k}, in);
    const Tensor tb = from_floats(backend, b, trans_b ? Shape{n, k} : Shape{k, n}, in);
    Tensor tc = from_floats(backend, c, {m, n}, out);
    backend.gemm(ta, trans_a, tb, trans_b, tc, alpha, beta);
    return to_floats(backend, tc);
  }
};

TEST_F(CpuGemmTest, MatchesNaiveProductForEveryTransposeCombination) {
  const int64_t m = 37, n = 29, k = 45;
  const auto a = random_values(m * k, 1), b = random_values(k * n, 2);
  const std::vector<float> c(m * n, 0.0f);
  for (const Case t :
       {Case{false, false}, Case{true, false}, Case{false, true}, Case{true, true}}) {
    SCOPED_TRACE(::testing::Message() << "trans_a " << t.trans_a << ", trans_b " << t.trans_b);
    const HostMatrix ha{a, t.trans_a ? m : k, t.trans_a}, hb{b, t.trans_b ? k : n, t.trans_b};
    const auto got = run(a, t.trans_a, b, t.trans_b, c, m, n, k, 1.0f, 0.0f);
    expect_near_product(got, reference(ha, hb, c, m, n, k, 1.0, 0.0), ha, hb, c, n, k, 1.0, 0.0,
                        kF32Tolerance);
  }
}

TEST_F(CpuGemmTest, AlphaScalesTheProductAndBetaScalesTheExistingC) {
  const int64_t m = 12, n = 17, k = 9;
  const auto a = random_values(m * k, 3), b = random_values(k * n, 4), c = random_values(m * n, 5);
  const HostMatrix ha{a, k, false}, hb{b, k, true};
  const auto got = run(a, false, b, true, c, m, n, k, 0.5f, -2.0f);
  expect_near_product(got, reference(ha, hb, c, m, n, k, 0.5, -2.0), ha, hb, c, n, k, 0.5, -2.0,
                      kF32Tolerance);
}

TEST_F(CpuGemmTest, BetaZeroIgnoresWhateverCHeld) {
  const int64_t m = 5, n = 6, k = 7;
  const auto a = random_values(m * k, 6), b = random_values(k * n, 7);
  const std::vector<float> nans(m * n, std::numeric_limits<float>::quiet_NaN());
  for (const DType out : {DType::F32, DType::Bf16}) {
    const auto got = run(a, false, b, false, nans, m, n, k, 1.0f, 0.0f, out, out);
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << name(out);
  }
}

TEST_F(CpuGemmTest, ZeroInnerDimensionLeavesBetaTimesC) {
  const int64_t m = 3, n = 4;
  const auto c = random_values(m * n, 8);
  Tensor tc = from_floats(backend, c, {m, n});
  backend.gemm(backend.empty({m, 0}, DType::F32), false, backend.empty({0, n}, DType::F32), false,
               tc, 1.0f, 3.0f);
  const auto got = to_floats(backend, tc);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_FLOAT_EQ(got[i], 3.0f * c[i]);
}

// bf16 keeps 8 significant bits, so each operand is within 2^-9 of its f32 value and each product
// within about 2^-8: the result is within 2^-8 of the magnitude sum of the exact product.
TEST_F(CpuGemmTest, Bf16OperandsAgreeWithTheF32ProductToBf16Precision) {
  const int64_t m = 19, n = 23, k = 31;
  const auto a = random_values(m * k, 9), b = random_values(k * n, 10);
  const std::vector<float> c(m * n, 0.0f);
  for (const Case t :
       {Case{false, false}, Case{true, false}, Case{false, true}, Case{true, true}}) {
    SCOPED_TRACE(::testing::Message() << "trans_a " << t.trans_a << ", trans_b " << t.trans_b);
    const HostMatrix ha{a, t.trans_a ? m : k, t.trans_a}, hb{b, t.trans_b ? k : n, t.trans_b};
    const auto got = run(a, t.trans_a, b, t.trans_b, c, m, n, k, 1.0f, 0.0f, DType::Bf16);
    expect_near_product(got, reference(ha, hb, c, m, n, k, 1.0, 0.0), ha, hb, c, n, k, 1.0, 0.0,
                        1.0 / 256);
  }
}

// With the operands rounded to bf16 first, only f32 accumulation separates the two: the bf16
// path computes exactly the product of the rounded values.
TEST_F(CpuGemmTest, Bf16OperandsAreMultipliedExactlyAsRounded) {
  const int64_t m = 8, n = 11, k = 40;
  const auto a =
      to_floats(backend, from_floats(backend, random_values(m * k, 11), {m, k}, DType::Bf16));
  const auto b =
      to_floats(backend, from_floats(backend, random_values(k * n, 12), {k, n}, DType::Bf16));
  const std::vector<float> c(m * n, 0.0f);
  const HostMatrix ha{a, k, false}, hb{b, n, false};
  const auto got = run(a, false, b, false, c, m, n, k, 1.0f, 0.0f, DType::Bf16);
  expect_near_product(got, reference(ha, hb, c, m, n, k, 1.0, 0.0), ha, hb, c, n, k, 1.0, 0.0,
                      kF32Tolerance);
}

// A bf16 c is read (for beta) and written in bf16. With every input already a bf16 value, the
// result is within one bf16 rounding (2^-9 relative; 2^-8 allowed) of the exact value, plus f32
// accumulation error of about 1e-6 on sums of magnitude ~20 (1e-5 allowed) near zero.
TEST_F(CpuGemmTest, Bf16OutputHonoursBetaAndRoundsTheResult) {
  const int64_t m = 9, n = 10, k = 12;
  const auto a =
      to_floats(backend, from_floats(backend, random_values(m * k, 13), {m, k}, DType::Bf16));
  const auto b =
      to_floats(backend, from_floats(backend, random_values(k * n, 14), {n, k}, DType::Bf16));
  const auto c =
      to_floats(backend, from_floats(backend, random_values(m * n, 15), {m, n}, DType::Bf16));
  const HostMatrix ha{a, k, false}, hb{b, k, true};
  const auto got = run(a, false, b, true, c, m, n, k, 2.0f, 0.5f, DType::Bf16, DType::Bf16);
  const auto want = reference(ha, hb, c, m, n, k, 2.0, 0.5);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], std::abs(want[i]) / 256 + 1e-5) << i;
  }
}

// Large enough that the 16-bit path splits c into several row blocks and the inner dimension into
// several panels; checked on a sample of columns to keep the reference cheap.
TEST_F(CpuGemmTest, Bf16ProductSplitIntoBlocksAndPanelsMatchesTheWholeProduct) {
  const int64_t m = 70, n = int64_t{1} << 17, k = 130;
  const auto a =
      to_floats(backend, from_floats(backend, random_values(m * k, 16), {m, k}, DType::Bf16));
  const auto b =
      to_floats(backend, from_floats(backend, random_values(n * k, 17), {n, k}, DType::Bf16));
  const auto c =
      to_floats(backend, from_floats(backend, random_values(m * n, 18), {m, n}, DType::Bf16));
  const auto got = run(a, false, b, true, c, m, n, k, 1.0f, 0.5f, DType::Bf16, DType::Bf16);
  const HostMatrix ha{a, k, false}, hb{b, k, true};
  int failures = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = i; j < n; j += 997) {
      double want = 0.5 * c[static_cast<size_t>(i * n + j)];
      for (int64_t p = 0; p < k; ++p) want += ha(i, p) * hb(p, j);
      // One bf16 rounding of the result plus f32 accumulation over k = 130 terms of size ~1.
      const double tolerance = std::abs(want) / 256 + 1e-4;
      if (std::abs(got[static_cast<size_t>(i * n + j)] - want) > tolerance && failures++ < 5) {
        ADD_FAILURE() << "c[" << i << ", " << j << "] = " << got[static_cast<size_t>(i * n + j)]
                      << ", want " << want;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_F(CpuGemmTest, BatchedMultipliesEachMatrixOfTheBatch) {
  const int64_t batch = 3, m = 6, n = 5, k = 7;
  for (const DType in : {DType::F32, DType::Bf16}) {
    for (const Case t :
         {Case{false, false}, Case{true, false}, Case{false, true}, Case{true, true}}) {
      SCOPED_TRACE(::testing::Message()
                   << name(in) << ", trans_a " << t.trans_a << ", trans_b " << t.trans_b);
      const auto a = to_floats(
          backend, from_floats(backend, random_values(batch * m * k, 19), {batch * m * k}, in));
      const auto b = to_floats(
          backend, from_floats(backend, random_values(batch * k * n, 20), {batch * k * n}, in));
      const auto c = random_values(batch * m * n, 21);
      const Tensor ta =
          from_floats(backend, a, t.trans_a ? Shape{batch, k, m} : Shape{batch, m, k}, in);
      const Tensor tb =
          from_floats(backend, b, t.trans_b ? Shape{batch, n, k} : Shape{batch, k, n}, in);
      Tensor tc = from_floats(backend, c, {batch, m, n});
      backend.gemm_batched(ta, t.trans_a, tb, t.trans_b, tc, 1.5f, 0.25f);
      const auto got = to_floats(backend, tc);
      for (int64_t i = 0; i < batch; ++i) {
        const std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
        const std::vector<float> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
        const std::vector<float> ci(c.begin() + i * m * n, c.begin() + (i + 1) * m * n);
        const std::vector<float> gi(got.begin() + i * m * n, got.begin() + (i + 1) * m * n);
        const HostMatrix ha{ai, t.trans_a ? m : k, t.trans_a}, hb{bi, t.trans_b ? k : n, t.trans_b};
        expect_near_product(gi, reference(ha, hb, ci, m, n, k, 1.5, 0.25), ha, hb, ci, n, k, 1.5,
                            0.25, kF32Tolerance);
      }
    }
  }
}

TEST_F(CpuGemmTest, RejectsShapesThatDoNotChain) {
  const Tensor a = backend.zeros({4, 5}, DType::F32), b = backend.zeros({6, 3}, DType::F32);
  Tensor c = backend.zeros({4, 3}, DType::F32);
  EXPECT_THROW(backend.gemm(a, false, b, false, c, 1.0f, 0.0f), std::logic_error);
  Tensor wrong_c = backend.zeros({4, 4}, DType::F32);
  const Tensor b2 = backend.zeros({5, 3}, DType::F32);
  EXPECT_THROW(backend.gemm(a, false, b2, false, wrong_c, 1.0f, 0.0f), std::logic_error);
}

TEST_F(CpuGemmTest, RejectsOperandsOfDifferentDtypes) {
  const Tensor a = backend.zeros({2, 2}, DType::F32), b = backend.zeros({2, 2}, DType::Bf16);
  Tensor c = backend.zeros({2, 2}, DType::F32);
  EXPECT_THROW(backend.gemm(a, false, b, false, c, 1.0f, 0.0f), std::logic_error);
  const Tensor a16 = backend.zeros({2, 2}, DType::Bf16);
  Tensor c16 = backend.zeros({2, 2}, DType::F16);
  EXPECT_THROW(backend.gemm(a16, false, b, false, c16, 1.0f, 0.0f), std::logic_error);
}

TEST_F(CpuGemmTest, BatchedRejectsDifferentBatchSizes) {
  const Tensor a = backend.zeros({2, 3, 3}, DType::F32), b = backend.zeros({3, 3, 3}, DType::F32);
  Tensor c = backend.zeros({2, 3, 3}, DType::F32);
  EXPECT_THROW(backend.gemm_batched(a, false, b, false, c, 1.0f, 0.0f), std::logic_error);
}

}  // namespace cpu_gemm_test
}  // namespace megatron::tensor
