// CpuBackend::attention_cached (generation's attention over a key/value cache) against the
// backend's own full causal attention over the whole sequence: a prefill then one or several
// tokens per step must give every position the output the whole sequence gives it. And rotary
// with a position offset against the same positions rotated in a whole sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace cpu_cached_attention_test {

struct Case {
  int64_t batch = 2, seq = 70, heads = 4, groups = 2, head_dim = 8;
  DType dtype = DType::F32;
};

std::vector<float> random_rows(int64_t n, uint64_t seed) {
  Tensor t;
  CpuBackend b(1);
  t = b.empty({n}, DType::F32);
  b.normal(t, 0.0f, 1.0f, {.seed = seed, .stream = 3});
  return to_floats(b, t);
}

// Rows [first, first + count) of each sequence of a batch-major [batch * seq, width] matrix.
std::vector<float> rows_of(const std::vector<float>& x, int64_t batch, int64_t seq, int64_t width,
                           int64_t first, int64_t count) {
  std::vector<float> out;
  for (int64_t b = 0; b < batch; ++b) {
    const auto begin = x.begin() + (b * seq + first) * width;
    out.insert(out.end(), begin, begin + count * width);
  }
  return out;
}

// The cached outputs, fed `steps` tokens at a time after a prefill of `prefill`, against the
// whole sequence's. Both compute in f32 from the same inputs; they differ in summation order and
// exp (the blocked kernel's polynomial against std::exp): ~1e-6 of outputs ~1.
void expect_matches_full(const Case& c, int64_t prefill, int64_t step, double tolerance) {
  CpuBackend b(2);
  const AttentionShape whole{.batch = c.batch, .seq = c.seq, .heads = c.heads, .groups = c.groups,
                             .head_dim = c.head_dim};
  const int64_t width = whole.qkv_width(), out_width = c.heads * c.head_dim;
  const std::vector<float> qkv = random_rows(c.batch * c.seq * width, 7);
  Tensor all = from_floats(b, qkv, {c.batch * c.seq, width}, c.dtype);
  Tensor out = b.empty({c.batch * c.seq, out_width}, c.dtype);
  Tensor lse = b.empty({c.batch, c.heads, c.seq}, DType::F32);
  b.attention_forward(all, whole, {.scale = 1.0f / std::sqrt(float(c.head_dim)), .causal = true},
                      out, lse);
  const std::vector<float> want = to_floats(b, out);

  Tensor k = b.zeros({c.batch, c.groups, c.seq, c.head_dim}, c.dtype);
  Tensor v = b.zeros({c.batch, c.groups, c.seq, c.head_dim}, c.dtype);
  for (int64_t start = 0; start < c.seq;) {
    const int64_t n = std::min(start == 0 ? prefill : step, c.seq - start);
    AttentionShape part = whole;
    part.seq = n;
    Tensor in = from_floats(b, rows_of(qkv, c.batch, c.seq, width, start, n), {c.batch * n, width}, c.dtype);
    Tensor got = b.empty({c.batch * n, out_width}, c.dtype);
    b.attention_cached(in, part, start, 1.0f / std::sqrt(float(c.head_dim)), k, v, got);
    const std::vector<float> got_rows = to_floats(b, got);
    const std::vector<float> want_rows = rows_of(want, c.batch, c.seq, out_width, start, n);
    ASSERT_EQ(got_rows.size(), want_rows.size());
    for (size_t i = 0; i < got_rows.size(); ++i) {
      ASSERT_NEAR(got_rows[i], want_rows[i], tolerance)
          << "positions " << start << ".." << start + n << ", element " << i;
    }
    start += n;
  }
}

TEST(CpuCachedAttention, OneTokenPerStepAfterAPrefillMatchesTheWholeSequence) {
  expect_matches_full({}, 5, 1, 1e-5);
}

TEST(CpuCachedAttention, SeveralTokensPerStepMatchTheWholeSequence) {
  expect_matches_full({}, 3, 7, 1e-5);
}

TEST(CpuCachedAttention, GroupedQueryAttentionAndWideHeadsMatchTheWholeSequence) {
  expect_matches_full({.batch = 3, .seq = 40, .heads = 6, .groups = 2, .head_dim = 20}, 1, 1, 1e-5);
}

TEST(CpuCachedAttention, Bf16CachesMatchTheWholeSequenceWithinTheirRounding) {
  // Outputs rounded to bf16 (8 significant bits) on both paths: two ulps at values ~1.
  expect_matches_full({.seq = 30, .dtype = DType::Bf16}, 4, 1, 1.0 / 64);
}

TEST(CpuCachedAttention, WritesTheNewKeysAndValuesAtTheirPositions) {
  CpuBackend b(1);
  const AttentionShape s{.batch = 2, .seq = 1, .heads = 2, .groups = 1, .head_dim = 2};
  // One token per sequence; row: q0 (2), q1 (2), k (2), v (2).
  const std::vector<float> qkv = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18};
  Tensor k = b.zeros({2, 1, 4, 2}, DType::F32), v = b.zeros({2, 1, 4, 2}, DType::F32);
  Tensor in = from_floats(b, qkv, {2, 8}, DType::F32);
  // Position 2 attends to the zero keys before it too: fine for this check.
  Tensor out = b.empty({2, 4}, DType::F32);
  b.attention_cached(in, s, 2, 1.0f, k, v, out);
  const std::vector<float> keys = to_floats(b, k), values = to_floats(b, v);
  EXPECT_EQ(keys, (std::vector<float>{0, 0, 0, 0, 5, 6, 0, 0, 0, 0, 0, 0, 15, 16, 0, 0}));
  EXPECT_EQ(values, (std::vector<float>{0, 0, 0, 0, 7, 8, 0, 0, 0, 0, 0, 0, 17, 18, 0, 0}));
}

TEST(CpuCachedAttention, RefusesPositionsPastTheCache) {
  CpuBackend b(1);
  const AttentionShape s{.batch = 1, .seq = 2, .heads = 1, .groups = 1, .head_dim = 2};
  Tensor k = b.zeros({1, 1, 3, 2}, DType::F32), v = b.zeros({1, 1, 3, 2}, DType::F32);
  Tensor in = b.zeros({2, 6}, DType::F32), out = b.empty({2, 2}, DType::F32);
  EXPECT_THROW(b.attention_cached(in, s, 2, 1.0f, k, v, out), std::logic_error);
}

TEST(CpuRotaryOffset, RotatesTheTailAsTheWholeSequenceRotatesThosePositions) {
  CpuBackend b(1);
  const AttentionShape whole{.batch = 2, .seq = 9, .heads = 2, .groups = 1, .head_dim = 8};
  const int64_t width = whole.qkv_width();
  const std::vector<float> qkv = random_rows(2 * 9 * width, 11);
  Tensor all = from_floats(b, qkv, {18, width}, DType::F32);
  const RotaryOptions options{.rotary_dim = 8, .base = 10000.0};
  b.rotary(all, whole, options, false);
  const std::vector<float> want = rows_of(to_floats(b, all), 2, 9, width, 6, 3);
  AttentionShape tail = whole;
  tail.seq = 3;
  Tensor part = from_floats(b, rows_of(qkv, 2, 9, width, 6, 3), {6, width}, DType::F32);
  RotaryOptions shifted = options;
  shifted.position_offset = 6;
  b.rotary(part, tail, shifted, false);
  EXPECT_EQ(to_floats(b, part), want);  // the same angles, computed the same way
}

}  // namespace cpu_cached_attention_test
}  // namespace megatron::tensor
