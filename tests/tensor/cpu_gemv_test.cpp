// CpuBackend::gemm with one row of output (generation's decode step, which runs as sgemv):
// every transpose combination against a double reference, with alpha and beta, and NaN left in
// an uninitialised output ignored when beta is 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace {

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

}  // namespace
}  // namespace megatron::tensor
