// CpuBackend::attention_paged (continuous batching's attention over a paged key/value cache)
// against the backend's full causal attention over each whole sequence: two sequences whose
// blocks lie scattered through the pool, fed in steps that mix prompt chunks and single tokens of
// both, must give every position the output its whole sequence gives it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_paged_attention_test {

std::vector<float> random_rows(CpuBackend& b, int64_t n, uint64_t seed) {
  Tensor t = b.empty({n}, DType::F32);
  b.normal(t, 0.0f, 1.0f, {.seed = seed, .stream = 3});
  return to_floats(b, t);
}

TEST(CpuPagedAttention, ScatteredBlocksAndMixedStepsGiveEachPositionItsWholeSequencesOutput) {
  CpuBackend b(2);
  const int64_t heads = 4, groups = 2, dim = 8, block = 4;
  const std::vector<int64_t> lengths = {13, 9};
  const std::vector<std::vector<int32_t>> tables = {{5, 0, 7, 2}, {3, 6, 1, 4}};  // blocks of each
  const float scale = 1.0f / std::sqrt(float(dim));
  std::vector<std::vector<float>> qkv, want;
  const AttentionShape one{.batch = 1, .seq = 1, .heads = heads, .groups = groups, .head_dim = dim};
  const int64_t width = one.qkv_width();
  for (size_t s = 0; s < lengths.size(); ++s) {
    qkv.push_back(random_rows(b, lengths[s] * width, 11 + s));
    AttentionShape whole = one;
    whole.seq = lengths[s];
    Tensor in = from_floats(b, qkv[s], {lengths[s], width}, DType::F32);
    Tensor out = b.empty({lengths[s], heads * dim}, DType::F32);
    Tensor lse = b.empty({1, heads, lengths[s]}, DType::F32);
    b.attention_forward(in, whole, {.scale = scale, .causal = true}, out, lse);
    want.push_back(to_floats(b, out));
  }
  Tensor k = b.zeros({8, groups, block, dim}, DType::F32), v = b.zeros({8, groups, block, dim}, DType::F32);
  // Each step: (sequence, first position, count) runs.
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
    Tensor in = from_floats(b, rows, {n, width}, DType::F32);
    Tensor pos = b.empty({n}, DType::I32), tab = b.empty({n, 4}, DType::I32);
    b.write(pos, positions.data());
    b.write(tab, step_tables.data());
    Tensor out = b.empty({n, heads * dim}, DType::F32);
    b.attention_paged(in, shape, pos, tab, scale, k, v, out);
    const std::vector<float> got = to_floats(b, out);
    int64_t r = 0;
    for (const auto& [s, first, count] : step) {
      for (int64_t p = first; p < first + count; ++p, ++r) {
        for (int64_t c = 0; c < heads * dim; ++c) {
          // The whole sequence's blocked kernel sums in another order: ~1e-6 of outputs ~1.
          ASSERT_NEAR(got[size_t(r * heads * dim + c)], want[size_t(s)][size_t(p * heads * dim + c)], 1e-5)
              << "sequence " << s << " position " << p;
        }
      }
    }
  }
}

TEST(CpuPagedAttention, ABlockTableNamingABlockOutsideThePoolIsRefused) {
  CpuBackend b(1);
  const AttentionShape shape{.batch = 1, .seq = 1, .heads = 2, .groups = 1, .head_dim = 4};
  Tensor in = b.zeros({1, shape.qkv_width()}, DType::F32), out = b.empty({1, 8}, DType::F32);
  Tensor k = b.zeros({2, 1, 4, 4}, DType::F32), v = b.zeros({2, 1, 4, 4}, DType::F32);
  Tensor pos = b.empty({1}, DType::I32), tab = b.empty({1, 1}, DType::I32);
  const int32_t p = 0, block = 2;
  b.write(pos, &p);
  b.write(tab, &block);
  EXPECT_THROW(b.attention_paged(in, shape, pos, tab, 1.0f, k, v, out), std::logic_error);
}

}  // namespace cpu_paged_attention_test
}  // namespace megatron::tensor
