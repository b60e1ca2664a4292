// CpuBackend::gemm's paths for generation: one f32 row of output (a decode step, run as sgemv)
// for every transpose combination, with alpha and beta, and NaN left in an uninitialised
// output ignored when beta is 0; and a few rows against a weight's transpose.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_gemv_test {

std::vector<float> values(int64_t n, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(float(i) * step);
  return v;
}

TEST(CpuGemv, OneRowProductsMatchADoubleReferenceForEveryTranspose) {
  CpuBackend b(2);
  const int64_t k = 37, n = 53;
  const std::vector<float> x = values(k, 0.7f), w = values(k * n, 0.3f), c0 = values(n, 1.1f);
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      for (const float beta : {0.0f, 0.5f}) {
        const Tensor a = from_floats(b, x, trans_a ? Shape{k, 1} : Shape{1, k});
        const Tensor wt = from_floats(b, w, trans_b ? Shape{n, k} : Shape{k, n});
        std::vector<float> start = c0;
        if (beta == 0.0f) start.assign(size_t(n), std::numeric_limits<float>::quiet_NaN());
        Tensor c = from_floats(b, start, {1, n});
        b.gemm(a, trans_a, wt, trans_b, c, 2.0f, beta);
        const std::vector<float> got = to_floats(b, c);
        for (int64_t j = 0; j < n; ++j) {
          double want = beta == 0.0f ? 0.0 : double(beta) * c0[size_t(j)];
          for (int64_t i = 0; i < k; ++i) {
            want += 2.0 * x[size_t(i)] * w[size_t(trans_b ? j * k + i : i * n + j)];
          }
          // f32 dot products of 37 terms ~1: ~1e-6.
          ASSERT_NEAR(got[size_t(j)], want, 1e-4)
              << "trans_a " << trans_a << " trans_b " << trans_b << " beta " << beta << " column " << j;
        }
      }
    }
  }
}

// A few rows against b^T (generation's decode steps of a batch, short prefills) in every dtype
// against a double reference from the same rounded inputs.
TEST(CpuGemv, AFewRowsAgainstATransposedWeightMatchADoubleReference) {
  CpuBackend b(2);
  const int64_t k = 45, n = 70;
  for (const DType dtype : {DType::F32, DType::Bf16, DType::F16}) {
    for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{16}}) {
      for (const DType out : {DType::F32, dtype}) {
        for (const float beta : {0.0f, 0.5f}) {
          const Tensor a = from_floats(b, values(m * k, 0.7f), {m, k}, dtype);
          const Tensor w = from_floats(b, values(n * k, 0.3f), {n, k}, dtype);
          const std::vector<float> x = to_floats(b, a), wt = to_floats(b, w);  // as rounded
          Tensor c = from_floats(b, values(m * n, 1.1f), {m, n}, out);
          const std::vector<float> c0 = to_floats(b, c);
          b.gemm(a, false, w, true, c, 2.0f, beta);
          const std::vector<float> got = to_floats(b, c);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double want = double(beta) * c0[size_t(i * n + j)];
              for (int64_t q = 0; q < k; ++q) want += 2.0 * x[size_t(i * k + q)] * wt[size_t(j * k + q)];
              // f32 sums of 45 products ~1 (1e-5); a 16-bit c rounds to its ulp at ~|want|.
              const double tolerance = out == DType::F32 ? 1e-4 : std::max(1e-4, std::abs(want) / 100);
              ASSERT_NEAR(got[size_t(i * n + j)], want, tolerance)
                  << name(dtype) << " m " << m << " c " << name(out) << " beta " << beta;
            }
          }
        }
      }
    }
  }
}

}  // namespace cpu_gemv_test
}  // namespace megatron::tensor
