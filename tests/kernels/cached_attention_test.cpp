// CUDA generation attention (kernels/cached_attention.cu) and rotary with a position offset
// against the CPU backend: a prefill, then decode steps of one and of several tokens, the caches
// they write, for f32 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "tensor/host_io.hpp"

namespace megatron::test_support {
namespace cached_attention_test {

using tensor::AttentionShape;

class CudaCachedAttentionTest : public CudaOpTest {
 protected:
  // Feeds `seq` tokens as a prefill of `prefill` then steps of `step` to both backends, comparing
  // every step's output and, at the end, the caches.
  void run(const AttentionShape& whole, DType dtype, int64_t prefill, int64_t step) {
    const int64_t width = whole.qkv_width(), out_width = whole.heads * whole.head_dim;
    const Shape cache{whole.batch, whole.groups, whole.seq, whole.head_dim};
    Pair k = zeros(cache, dtype), v = zeros(cache, dtype);
    const std::vector<float> qkv = random_floats(size_t(whole.batch * whole.seq * width), 5);
    const float scale = 1.0f / std::sqrt(float(whole.head_dim));
    for (int64_t start = 0; start < whole.seq;) {
      const int64_t n = std::min(start == 0 ? prefill : step, whole.seq - start);
      std::vector<float> rows;
      for (int64_t b = 0; b < whole.batch; ++b) {
        const auto first = qkv.begin() + (b * whole.seq + start) * width;
        rows.insert(rows.end(), first, first + n * width);
      }
      AttentionShape part = whole;
      part.seq = n;
      Pair in = make(rows, {whole.batch * n, width}, dtype);
      Pair out = empty({whole.batch * n, out_width}, dtype);
      cpu().attention_cached(in.cpu, part, start, scale, k.cpu, v.cpu, out.cpu);
      gpu().attention_cached(in.gpu, part, start, scale, k.gpu, v.gpu, out.gpu);
      // As the flash kernel's comparison: f32 sums in other orders, 16-bit outputs two ulps.
      expect_close(out, dtype == DType::F32 ? 1e-4 : tolerance_for(dtype), 0.0, "attention output");
      start += n;
    }
    expect_equal(k, "key cache");
    expect_equal(v, "value cache");
  }
};

TEST_F(CudaCachedAttentionTest, DecodesOneTokenPerStepAsTheCpu) {
  run({.batch = 2, .seq = 37, .heads = 4, .groups = 2, .head_dim = 64}, DType::F32, 5, 1);
}

TEST_F(CudaCachedAttentionTest, DecodesSeveralTokensPerStepInBf16AsTheCpu) {
  run({.batch = 3, .seq = 40, .heads = 8, .groups = 8, .head_dim = 128}, DType::Bf16, 1, 6);
}

TEST_F(CudaCachedAttentionTest, DecodesSmallHeadsAsTheCpu) {
  run({.batch = 1, .seq = 20, .heads = 4, .groups = 4, .head_dim = 8}, DType::F32, 3, 1);
}

TEST_F(CudaCachedAttentionTest, RotatesWithAPositionOffsetAsTheCpu) {
  const AttentionShape s{.batch = 2, .seq = 3, .heads = 4, .groups = 2, .head_dim = 64};
  Pair qkv = random({s.batch * s.seq, s.qkv_width()}, DType::F32, 9);
  const tensor::RotaryOptions o{.rotary_dim = 64, .base = 10000.0, .position_offset = 1000};
  cpu().rotary(qkv.cpu, s, o, false);
  gpu().rotary(qkv.gpu, s, o, false);
  expect_close(qkv, 1e-5, 0.0, "rotated qkv");
}

}  // namespace cached_attention_test
}  // namespace megatron::test_support
