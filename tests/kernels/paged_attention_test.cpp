// CUDA continuous-batching attention (kernels/paged_attention.cu) against the CPU backend: two
// sequences with blocks scattered through the pool, fed in steps mixing prompt chunks and single
// tokens; every step's output and, at the end, the pools, for f32 and bf16.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace paged_attention_test {

using tensor::AttentionShape;

class CudaPagedAttentionTest : public CudaOpTest {
 protected:
  void run(DType dtype, int64_t heads, int64_t groups, int64_t dim) {
    const int64_t block = 4;
    const std::vector<std::vector<int32_t>> tables = {{5, 0, 7, 2}, {3, 6, 1, 4}};
    const AttentionShape one{.batch = 1, .seq = 1, .heads = heads, .groups = groups, .head_dim = dim};
    const int64_t width = one.qkv_width();
    const std::vector<std::vector<float>> qkv = {random_floats(size_t(13 * width), 5),
                                                 random_floats(size_t(9 * width), 6)};
    Pair k = zeros({8, groups, block, dim}, dtype), v = zeros({8, groups, block, dim}, dtype);
    const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
        {{0, 0, 5}, {1, 0, 3}}, {{1, 3, 1}, {0, 5, 1}}, {{0, 6, 7}, {1, 4, 5}}};
    for (const auto& step : steps) {
      std::vector<float> rows;
      std::vector<int32_t> positions, step_tables;
      for (const auto& [s, first, count] : step) {
        for (int64_t p = first; p < first + count; ++p) {
          rows.insert(rows.end(), qkv[size_t(s)].begin() + p * width, qkv[size_t(s)].begin() + (p + 1) * width);
          positions.push_back(int32_t(p));
          step_tables.insert(step_tables.end(), tables[size_t(s)].begin(), tables[size_t(s)].end());
        }
      }
      const int64_t n = int64_t(positions.size());
      AttentionShape shape = one;
      shape.batch = n;
      Pair in = make(rows, {n, width}, dtype);
      Pair pos = make_ints(positions, {n});
      Pair tab = make_ints(step_tables, {n, 4});
      Pair out = empty({n, heads * dim}, dtype);
      const float scale = 1.0f / std::sqrt(float(dim));
      cpu().attention_paged(in.cpu, shape, pos.cpu, tab.cpu, scale, k.cpu, v.cpu, out.cpu);
      gpu().attention_paged(in.gpu, shape, pos.gpu, tab.gpu, scale, k.gpu, v.gpu, out.gpu);
      // As the cached kernel's comparison: f32 sums in other orders, 16-bit outputs two ulps.
      expect_close(out, dtype == DType::F32 ? 1e-4 : tolerance_for(dtype), 0.0, "attention output");
    }
    expect_equal(k, "key pool");
    expect_equal(v, "value pool");
  }
};

TEST_F(CudaPagedAttentionTest, ScatteredBlocksAndMixedStepsMatchTheCpu) { run(DType::F32, 4, 2, 64); }

TEST_F(CudaPagedAttentionTest, Bf16WithOneGroupPerHeadMatchesTheCpu) { run(DType::Bf16, 8, 8, 128); }

}  // namespace paged_attention_test
}  // namespace megatron::test_support
