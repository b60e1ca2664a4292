// The CUDA backend's reductions to a host scalar (sum, dot, sum of squares, all_finite) against
// the CPU backend, plus the workspace they draw scratch memory from; skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "kernels/ops.hpp"

namespace megatron::test_support {
namespace reduce_test {

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};
// Not a multiple of the block or of the 8-element vectors; the larger size spreads over many
// blocks of the first pass.
constexpr int64_t kN = 100003;
constexpr int64_t kLarge = 3000017;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string dtype_name(DType dtype) { return std::string(tensor::name(dtype)); }

class CudaReduceTest : public CudaOpTest {
 protected:
  // Both backends add the same exact f64 terms (f32 values and products of two are exact in
  // f64), only in different orders. Each of n additions errs by at most 2^-53 of the running
  // sum, and random-order errors grow like sqrt(n): about 1e-14 of sum |term| here. 1e-12 of
  // sum |term| leaves a wide margin yet catches a term lost or counted twice (>= 1e-7 of it).
  void expect_sum_near(double got, double want, const std::vector<double>& terms) {
    double magnitude = 0.0;
    for (double t : terms) magnitude += std::abs(t);
    EXPECT_NEAR(got, want, 1e-12 * magnitude);
  }
  std::vector<double> values_of(const Pair& x) {
    const std::vector<float> v = tensor::to_floats(cpu(), x.cpu);
    return {v.begin(), v.end()};
  }
};

TEST_F(CudaReduceTest, SumMatchesTheCpuInF64) {
  for (int64_t n : {kN, kLarge}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::to_string(n) + " " + dtype_name(dtype));
      const Pair x = random({n}, dtype, 1);
      expect_sum_near(gpu().sum(x.gpu), cpu().sum(x.cpu), values_of(x));
    }
  }
}

TEST_F(CudaReduceTest, DotMatchesTheCpuAcrossDtypes) {
  for (DType da : kFloatTypes) {
    for (DType db : kFloatTypes) {
      SCOPED_TRACE(dtype_name(da) + " . " + dtype_name(db));
      const Pair a = random({kN}, da, 2), b = random({kN}, db, 3);
      const std::vector<double> va = values_of(a), vb = values_of(b);
      std::vector<double> terms(va.size());
      for (size_t i = 0; i < va.size(); ++i) terms[i] = va[i] * vb[i];
      expect_sum_near(gpu().dot(a.gpu, b.gpu), cpu().dot(a.cpu, b.cpu), terms);
    }
  }
}

TEST_F(CudaReduceTest, SumSquaresMatchesTheCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kLarge}, dtype, 4);
    std::vector<double> terms = values_of(x);
    for (double& t : terms) t *= t;
    expect_sum_near(gpu().sum_squares(x.gpu), cpu().sum_squares(x.cpu), terms);
  }
}

// 1e20 squared overflows f32 but not f64.
TEST_F(CudaReduceTest, SumSquaresOfLargeF32ValuesStaysFinite) {
  const std::vector<float> v(size_t(kN), 1e20f);
  const Pair x = make(v, {kN});
  const double got = gpu().sum_squares(x.gpu);
  EXPECT_TRUE(std::isfinite(got));
  std::vector<double> terms = values_of(x);
  for (double& t : terms) t *= t;
  expect_sum_near(got, cpu().sum_squares(x.cpu), terms);
}

TEST_F(CudaReduceTest, SumSquaresPropagatesInfinityAndNaN) {
  std::vector<float> v = random_floats(size_t(kN), 5);
  v[1234] = kInf;
  EXPECT_EQ(gpu().sum_squares(make(v, {kN}).gpu), kInf);
  v[kN - 1] = kNaN;  // in the scalar tail
  EXPECT_TRUE(std::isnan(gpu().sum_squares(make(v, {kN}).gpu)));
}

TEST_F(CudaReduceTest, SumIsBitwiseRepeatable) {
  const Pair x = random({kLarge}, DType::F32, 6);
  const double first = gpu().sum(x.gpu);
  EXPECT_EQ(gpu().sum(x.gpu), first);
}

// Alignment changes how the kernel loads elements (16-byte vectors or one by one), never which
// thread adds them: a misaligned slice sums exactly as an aligned copy of it.
TEST_F(CudaReduceTest, SumDoesNotDependOnAlignment) {
  const Pair whole = random({kN}, DType::Bf16, 7);
  const Tensor slice = whole.gpu.slice(1, kN);
  Tensor aligned = gpu().empty({kN - 1}, DType::Bf16);
  gpu().copy(slice, aligned);
  EXPECT_EQ(gpu().sum(slice), gpu().sum(aligned));
  const Pair part{whole.cpu.slice(1, kN), slice};
  expect_sum_near(gpu().sum(part.gpu), cpu().sum(part.cpu), values_of(part));
}

TEST_F(CudaReduceTest, AllFiniteIsTrueForFiniteValues) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kN}, dtype, 8, 100.0f);
    EXPECT_TRUE(gpu().all_finite(x.gpu));
  }
}

// One non-finite element, in the vectorised bulk or in the scalar tail, in every dtype.
TEST_F(CudaReduceTest, AllFiniteFindsASingleInfinityOrNaN) {
  for (DType dtype : kFloatTypes) {
    for (float bad : {kInf, -kInf, kNaN}) {
      for (int64_t at : {int64_t{777}, kN - 1}) {
        SCOPED_TRACE(dtype_name(dtype) + " " + std::to_string(bad) + " at " + std::to_string(at));
        std::vector<float> v = random_floats(size_t(kN), 9);
        v[size_t(at)] = bad;
        const Pair x = make(v, {kN}, dtype);
        EXPECT_EQ(gpu().all_finite(x.gpu), cpu().all_finite(x.cpu));
        EXPECT_FALSE(gpu().all_finite(x.gpu));
      }
    }
  }
}

TEST_F(CudaReduceTest, DotRejectsTensorsOfDifferentSizes) {
  EXPECT_THROW(gpu().dot(gpu().zeros({4}, DType::F32), gpu().zeros({5}, DType::F32)),
               std::logic_error);
}

// --- the workspace -------------------------------------------------------------------------------

TEST_F(CudaReduceTest, WorkspaceGrowsInWholeAlignedUnitsAndKeepsItsBuffer) {
  kernels::Workspace workspace;
  EXPECT_EQ(workspace.capacity(), 0u);
  void* first = workspace.get(100, nullptr);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 256, 0u);
  EXPECT_EQ(workspace.capacity(), 256u);
  EXPECT_EQ(workspace.get(256, nullptr), first);  // fits: the same buffer
  workspace.get(300, nullptr);                    // at least doubles
  EXPECT_EQ(workspace.capacity(), 512u);
  workspace.get(5000, nullptr);
  EXPECT_EQ(workspace.capacity(), 5120u);
}

}  // namespace reduce_test
}  // namespace megatron::test_support
