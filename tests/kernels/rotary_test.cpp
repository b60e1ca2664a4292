// The CUDA rotary embedding against the CPU backend: query and key heads of fused qkv rows for
// each dtype, partial rotary dims, distant positions, and the inverse undoing the rotation.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace rotary_test {

using tensor::AttentionShape;
using tensor::RotaryOptions;

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};

// Two groups of three query heads, heads 20 wide (not whole 16-byte vectors) of which 12
// channels rotate: value heads and the channels past rotary_dim must come out untouched.
constexpr AttentionShape kShape{.batch = 3, .seq = 37, .heads = 6, .groups = 2, .head_dim = 20};
constexpr RotaryOptions kPartial{.rotary_dim = 12, .base = 10000.0};

class CudaRotaryTest : public CudaOpTest {
 protected:
  Pair qkv(const AttentionShape& s, DType dtype, uint32_t seed) {
    return random({s.batch * s.seq, s.qkv_width()}, dtype, seed);
  }

  // Rotates x on both backends and compares. The angles are the CPU's f64 ones rounded to f32:
  // a rotated value differs only by f32 rounding (or one rounding of its 16-bit dtype).
  void check(const AttentionShape& s, const RotaryOptions& o, DType dtype, bool inverse) {
    Pair x = qkv(s, dtype, 1);
    cpu().rotary(x.cpu, s, o, inverse);
    gpu().rotary(x.gpu, s, o, inverse);
    expect_close(x, tolerance_for(dtype), 0.0, "qkv");
  }
};

TEST_F(CudaRotaryTest, RotatesQueryAndKeyHeadsAsTheCpuForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check(kShape, kPartial, dtype, false);
  }
}

TEST_F(CudaRotaryTest, InverseRotatesBackAsTheCpu) {
  check(kShape, kPartial, DType::F32, true);
  check(kShape, kPartial, DType::Bf16, true);
}

TEST_F(CudaRotaryTest, RotatesWholeAlignedHeadsAsTheCpu) {
  const AttentionShape s{.batch = 2, .seq = 64, .heads = 8, .groups = 2, .head_dim = 128};
  check(s, {.rotary_dim = 128, .base = 10000.0}, DType::Bf16, false);
  check(s, {.rotary_dim = 64, .base = 500000.0}, DType::F32, false);
}

// Positions up to 5000: angles of thousands of radians, formed in f64 on both sides.
TEST_F(CudaRotaryTest, RotatesDistantPositionsAsTheCpu) {
  const AttentionShape s{.batch = 1, .seq = 5000, .heads = 2, .groups = 1, .head_dim = 16};
  check(s, {.rotary_dim = 16, .base = 10000.0}, DType::F32, false);
}

// More channel pairs (320) than the host passes frequencies for (256): the device's pow.
TEST_F(CudaRotaryTest, RotatesVeryWideHeadsAsTheCpu) {
  const AttentionShape s{.batch = 2, .seq = 7, .heads = 1, .groups = 1, .head_dim = 640};
  check(s, {.rotary_dim = 640, .base = 10000.0}, DType::F32, false);
}

// Two rotations in f32 by f32 cosines and sines: a few ulp of the values.
TEST_F(CudaRotaryTest, InverseUndoesTheRotation) {
  const std::vector<float> values =
      random_floats(size_t(kShape.batch * kShape.seq * kShape.qkv_width()), 2);
  Tensor x = tensor::from_floats(gpu(), values, {kShape.batch * kShape.seq, kShape.qkv_width()});
  gpu().rotary(x, kShape, kPartial, false);
  gpu().rotary(x, kShape, kPartial, true);
  expect_close(tensor::to_floats(gpu(), x), values, tolerance_for(DType::F32), 0.0, "qkv");
}

TEST_F(CudaRotaryTest, RejectsAnOddRotaryDim) {
  Pair x = qkv(kShape, DType::F32, 3);
  EXPECT_THROW(gpu().rotary(x.gpu, kShape, {.rotary_dim = 7, .base = 10000.0}, false),
               std::logic_error);
}

TEST_F(CudaRotaryTest, RejectsQkvOfAnotherShape) {
  const AttentionShape s{.batch = 3, .seq = 37, .heads = 6, .groups = 3, .head_dim = 20};
  Pair x = qkv(kShape, DType::F32, 4);
  EXPECT_THROW(gpu().rotary(x.gpu, s, kPartial, false), std::logic_error);
}

}  // namespace rotary_test
}  // namespace megatron::test_support
