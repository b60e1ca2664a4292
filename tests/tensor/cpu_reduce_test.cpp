// CpuBackend's reductions to a host scalar: f64 accumulation, propagation of non-finite values,
// and results independent of the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/scoped_threads.hpp"

namespace megatron::tensor {
namespace cpu_reduce_test {

using test_support::random_values;

using test_support::ScopedThreads;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class CpuReduceTest : public ::testing::Test {
 protected:
  CpuBackend backend;

  Tensor make(const std::vector<float>& values, DType dtype = DType::F32) {
    return from_floats(backend, values, {static_cast<int64_t>(values.size())}, dtype);
  }
};

// 1e8 + 1 is 1e8 in f32: an f32 running sum would lose every 1 between the two large values.
TEST_F(CpuReduceTest, SumAccumulatesInDouble) {
  std::vector<float> x(100000, 1.0f);
  x.front() = 1e8f;
  x.back() = -1e8f;
  EXPECT_EQ(backend.sum(make(x)), 99998.0);
}

TEST_F(CpuReduceTest, SumOfBf16ValuesIsTheSumOfTheStoredValues) {
  const auto x = to_floats(backend, make(random_values(12345, 1), DType::Bf16));
  double want = 0.0;
  for (float v : x) want += v;
  // Both sides sum the same values in f64, in different orders: ~1e-16 relative per addition.
  EXPECT_NEAR(backend.sum(make(x, DType::Bf16)), want, 1e-10);
}

TEST_F(CpuReduceTest, SumOfAnEmptyTensorIsZero) {
  EXPECT_EQ(backend.sum(backend.empty({0}, DType::F32)), 0.0);
}

TEST_F(CpuReduceTest, DotSumsElementwiseProducts) {
  const auto a = random_values(7777, 2), b = random_values(7777, 3);
  double want = 0.0;
  for (size_t i = 0; i < a.size(); ++i) want += double(a[i]) * b[i];
  // Products of f32 values are exact in f64; only the f64 summation order differs.
  EXPECT_NEAR(backend.dot(make(a), make(b)), want, 1e-10);
}

TEST_F(CpuReduceTest, DotRejectsTensorsOfDifferentSizes) {
  EXPECT_THROW(backend.dot(make({1, 2, 3}), make({1, 2})), std::logic_error);
}

TEST_F(CpuReduceTest, SumSquaresSquaresInDoubleSoLargeFiniteValuesStayFinite) {
  // 1e30^2 overflows f32 but not f64.
  const double big = 1e30f;
  EXPECT_DOUBLE_EQ(backend.sum_squares(make({1e30f, -1e30f, 3.0f})), 2 * big * big + 9.0);
}

TEST_F(CpuReduceTest, SumSquaresPropagatesNaN) {
  std::vector<float> x(50000, 1.0f);
  x[31337] = kNaN;
  EXPECT_TRUE(std::isnan(backend.sum_squares(make(x))));
  EXPECT_TRUE(std::isnan(backend.sum_squares(make(x, DType::Bf16))));
}

TEST_F(CpuReduceTest, SumSquaresPropagatesInfinity) {
  std::vector<float> x(50000, 1.0f);
  x[4242] = -kInf;
  EXPECT_EQ(backend.sum_squares(make(x)), std::numeric_limits<double>::infinity());
}

TEST_F(CpuReduceTest, SumSquaresIsBitwiseIndependentOfThreadCount) {
  const Tensor x = make(random_values(1 << 20, 4));
  double results[3];
  for (int threads : {1, 2, 3}) {
    ScopedThreads scope(threads);
    results[threads - 1] = backend.sum_squares(x);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST_F(CpuReduceTest, AllFiniteIsTrueForFiniteValuesOfEveryDtype) {
  const auto x = random_values(10000, 5, 100.0f);
  for (DType dtype : {DType::F32, DType::Bf16, DType::F16}) {
    EXPECT_TRUE(backend.all_finite(make(x, dtype))) << name(dtype);
  }
}

TEST_F(CpuReduceTest, AllFiniteDetectsInfinityAndNaNInEveryDtype) {
  for (DType dtype : {DType::F32, DType::Bf16, DType::F16}) {
    for (float bad : {kInf, -kInf, kNaN}) {
      std::vector<float> x(70000, 0.5f);
      x[69999] = bad;
      EXPECT_FALSE(backend.all_finite(make(x, dtype))) << name(dtype) << " " << bad;
    }
  }
}

TEST_F(CpuReduceTest, AllFiniteSeesF16OverflowAsInfinity) {
  // 1e5 is finite in f32 but rounds to infinity in f16 (largest 65504).
  EXPECT_FALSE(backend.all_finite(make({1.0f, 1e5f}, DType::F16)));
  EXPECT_TRUE(backend.all_finite(make({1.0f, 1e5f}, DType::F32)));
}

}  // namespace cpu_reduce_test
}  // namespace megatron::tensor
