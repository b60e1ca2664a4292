// The CUDA backend's GELU, SwiGLU and dropout against the CPU backend on the same random inputs:
// dropout masks bit for bit, the activations within f32 rounding; every test skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "tensor/backend.hpp"

namespace megatron::test_support {
namespace activations_test {

using tensor::RngKey;

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};
// Not a multiple of the 256-thread block nor of the kernels' 8-element vectors (nor of a Philox
// block of 4): the scalar tail runs too.
constexpr int64_t kN = 100003;

std::string dtype_name(DType dtype) { return std::string(tensor::name(dtype)); }

class CudaActivationsTest : public CudaOpTest {
 protected:
  // Elements [1, n) of a one-dimensional tensor: off a 16-byte boundary, so the kernels take
  // their element-by-element path.
  static Pair misaligned(const Pair& t) {
    return {t.cpu.slice(1, t.cpu.dim(0)), t.gpu.slice(1, t.gpu.dim(0))};
  }
};

// --- GELU ----------------------------------------------------------------------------------------
// The same formulas as the CPU (A&S erf, Cephes exp), evaluated with fused multiply-adds on the
// GPU: a few f32 ulps apart, and 16-bit outputs may round to the neighbouring value.
// Inputs of scale 3 cover the curved part of GELU and its tails.

TEST_F(CudaActivationsTest, GeluErfForwardMatchesTheCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kN}, dtype, 1, 3.0f);
    Pair y = empty({kN}, dtype);
    cpu().gelu_forward(x.cpu, y.cpu, false);
    gpu().gelu_forward(x.gpu, y.gpu, false);
    expect_close(y, tolerance_for(dtype));
  }
}

TEST_F(CudaActivationsTest, GeluTanhForwardMatchesTheCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kN}, dtype, 2, 3.0f);
    Pair y = empty({kN}, dtype);
    cpu().gelu_forward(x.cpu, y.cpu, true);
    gpu().gelu_forward(x.gpu, y.gpu, true);
    expect_close(y, tolerance_for(dtype));
  }
}

TEST_F(CudaActivationsTest, GeluErfBackwardMatchesTheCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair dy = random({kN}, dtype, 3), x = random({kN}, dtype, 4, 3.0f);
    Pair dx = empty({kN}, dtype);
    cpu().gelu_backward(dy.cpu, x.cpu, dx.cpu, false);
    gpu().gelu_backward(dy.gpu, x.gpu, dx.gpu, false);
    expect_close(dx, tolerance_for(dtype));
  }
}

TEST_F(CudaActivationsTest, GeluTanhBackwardMatchesTheCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair dy = random({kN}, dtype, 5), x = random({kN}, dtype, 6, 3.0f);
    Pair dx = empty({kN}, dtype);
    cpu().gelu_backward(dy.cpu, x.cpu, dx.cpu, true);
    gpu().gelu_backward(dy.gpu, x.gpu, dx.gpu, true);
    expect_close(dx, tolerance_for(dtype));
  }
}

// A bf16 activation may produce an f32 gradient.
TEST_F(CudaActivationsTest, GeluBackwardWritesAnF32GradientFromBf16Inputs) {
  const Pair dy = random({kN}, DType::Bf16, 7), x = random({kN}, DType::Bf16, 8, 3.0f);
  Pair dx = empty({kN}, DType::F32);
  cpu().gelu_backward(dy.cpu, x.cpu, dx.cpu, false);
  gpu().gelu_backward(dy.gpu, x.gpu, dx.gpu, false);
  expect_close(dx, tolerance_for(DType::F32));
}

// --- SwiGLU --------------------------------------------------------------------------------------
// Rows of f = 771 (not a multiple of 8: element by element, groups crossing rows) and f = 1024
// (16-byte vectors); the sigmoid is the CPU's formula, with fused multiply-adds.

TEST_F(CudaActivationsTest, SwigluForwardMatchesTheCpu) {
  for (int64_t f : {771, 1024}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE("f = " + std::to_string(f) + " " + dtype_name(dtype));
      const Pair x = random({13, 2 * f}, dtype, 9, 2.0f);
      Pair y = empty({13, f}, dtype);
      cpu().swiglu_forward(x.cpu, y.cpu);
      gpu().swiglu_forward(x.gpu, y.gpu);
      expect_close(y, tolerance_for(dtype));
    }
  }
}

TEST_F(CudaActivationsTest, SwigluBackwardMatchesTheCpu) {
  for (int64_t f : {771, 1024}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE("f = " + std::to_string(f) + " " + dtype_name(dtype));
      const Pair x = random({13, 2 * f}, dtype, 10, 2.0f), dy = random({13, f}, dtype, 11);
      Pair dx = empty({13, 2 * f}, dtype);
      cpu().swiglu_backward(dy.cpu, x.cpu, dx.cpu);
      gpu().swiglu_backward(dy.gpu, x.gpu, dx.gpu);
      expect_close(dx, tolerance_for(dtype));
    }
  }
}

TEST_F(CudaActivationsTest, GegluForwardAndBackwardMatchTheCpu) {
  for (int64_t f : {771, 1024}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE("f = " + std::to_string(f) + " " + dtype_name(dtype));
      const Pair x = random({13, 2 * f}, dtype, 12, 2.0f), dy = random({13, f}, dtype, 13);
      Pair y = empty({13, f}, dtype), dx = empty({13, 2 * f}, dtype);
      cpu().geglu_forward(x.cpu, y.cpu);
      gpu().geglu_forward(x.gpu, y.gpu);
      expect_close(y, tolerance_for(dtype));
      cpu().geglu_backward(dy.cpu, x.cpu, dx.cpu);
      gpu().geglu_backward(dy.gpu, x.gpu, dx.gpu);
      expect_close(dx, tolerance_for(dtype));
    }
  }
}

TEST_F(CudaActivationsTest, SwigluRejectsAnInputThatIsNotTwiceAsWide) {
  const Tensor x = gpu().zeros({4, 10}, DType::F32);
  Tensor y = gpu().empty({4, 4}, DType::F32);
  EXPECT_THROW(gpu().swiglu_forward(x, y), std::logic_error);
}

// --- dropout -------------------------------------------------------------------------------------
// Both backends keep element i where uniform_at(key, key.offset + i) >= p and multiply the kept
// ones by the same f32 scale: one rounding each, so outputs agree bit for bit in every dtype.

TEST_F(CudaActivationsTest, DropoutForwardMaskMatchesTheCpuBitForBit) {
  // Offsets 0 and 4 start on a Philox block, 5, 6 and 7 split one (a shard of a tensor).
  for (uint64_t offset : {0, 4, 5, 6, 7}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const RngKey key{.seed = 1234, .stream = 0x100000007ull, .offset = offset};
    const Pair x = random({kN}, DType::F32, 12);
    Pair y = empty({kN}, DType::F32);
    cpu().dropout_forward(x.cpu, y.cpu, 0.3f, key);
    gpu().dropout_forward(x.gpu, y.gpu, 0.3f, key);
    expect_equal(y);
  }
}

TEST_F(CudaActivationsTest, DropoutForwardMatchesTheCpuBitForBitIn16BitDtypes) {
  const RngKey key{.seed = 99, .stream = 3, .offset = 2};
  for (DType dtype : {DType::Bf16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kN}, dtype, 13);
    Pair y = empty({kN}, dtype);
    cpu().dropout_forward(x.cpu, y.cpu, 0.1f, key);
    gpu().dropout_forward(x.gpu, y.gpu, 0.1f, key);
    expect_equal(y);
  }
}

TEST_F(CudaActivationsTest, DropoutBackwardDropsTheSameElementsBitForBit) {
  const RngKey key{.seed = 7, .stream = 11, .offset = 0};
  const Pair dy = random({kN}, DType::F32, 14);
  Pair dx = empty({kN}, DType::F32);
  cpu().dropout_backward(dy.cpu, dx.cpu, 0.5f, key);
  gpu().dropout_backward(dy.gpu, dx.gpu, 0.5f, key);
  expect_equal(dx);
}

TEST_F(CudaActivationsTest, DropoutOfMisalignedSlicesMatchesTheCpuBitForBit) {
  const RngKey key{.seed = 5, .stream = 6, .offset = 1};
  const Pair x = misaligned(random({kN}, DType::F32, 15));
  Pair y = misaligned(empty({kN}, DType::F32));
  cpu().dropout_forward(x.cpu, y.cpu, 0.25f, key);
  gpu().dropout_forward(x.gpu, y.gpu, 0.25f, key);
  expect_equal(y);
}

// The product and the sum are each rounded once on the GPU; the CPU compiler might fuse them, so
// this compares within f32 rounding (the mask itself is checked bit for bit above).
TEST_F(CudaActivationsTest, DropoutAddAddsTheResidualToTheDroppedInput) {
  const RngKey key{.seed = 21, .stream = 22, .offset = 3};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair x = random({kN}, dtype, 16), residual = random({kN}, dtype, 17);
    Pair out = empty({kN}, dtype);
    cpu().dropout_add(x.cpu, residual.cpu, out.cpu, 0.2f, key);
    gpu().dropout_add(x.gpu, residual.gpu, out.gpu, 0.2f, key);
    expect_close(out, tolerance_for(dtype));
  }
}

// The fused kernel against the CPU's bias_add then dropout_add: the same masks, and x + bias
// rounded to x's dtype before dropout as bias_add stores it. 96 columns: rows of the bias
// straddle the kernel's 8-element groups.
TEST_F(CudaActivationsTest, BiasDropoutAddEqualsBiasAddThenDropoutAdd) {
  const RngKey key{.seed = 11, .stream = 5, .offset = 0};
  for (DType dtype : {DType::F32, DType::Bf16, DType::F16})
    for (float p : {0.0f, 0.2f}) {
      SCOPED_TRACE(dtype_name(dtype) + " p " + std::to_string(p));
      Pair x = random({77, 96}, dtype, 19), residual = random({77, 96}, dtype, 20);
      const Pair bias = random({96}, dtype, 21);
      Pair out = empty({77, 96}, dtype);
      cpu().bias_dropout_add(x.cpu, bias.cpu, residual.cpu, out.cpu, p, key);
      gpu().bias_dropout_add(x.gpu, bias.gpu, residual.gpu, out.gpu, p, key);
      expect_close(out, tolerance_for(dtype));
    }
}

TEST_F(CudaActivationsTest, DropoutWithProbabilityZeroCopiesTheInput) {
  const RngKey key{.seed = 1, .stream = 2, .offset = 0};
  const Pair x = random({kN}, DType::Bf16, 18);
  Pair y = empty({kN}, DType::F32);
  cpu().dropout_forward(x.cpu, y.cpu, 0.0f, key);
  gpu().dropout_forward(x.gpu, y.gpu, 0.0f, key);
  expect_equal(y);
}

TEST_F(CudaActivationsTest, DropoutWithProbabilityOneZeroesEverything) {
  const RngKey key{.seed = 1, .stream = 2, .offset = 0};
  const Pair x = random({kN}, DType::F32, 19);
  Pair y = random({kN}, DType::F32, 20);
  cpu().dropout_forward(x.cpu, y.cpu, 1.0f, key);
  gpu().dropout_forward(x.gpu, y.gpu, 1.0f, key);
  expect_equal(y);
}

TEST_F(CudaActivationsTest, DropoutRejectsAProbabilityAboveOne) {
  const Tensor x = gpu().zeros({8}, DType::F32);
  Tensor y = gpu().empty({8}, DType::F32);
  EXPECT_THROW(gpu().dropout_forward(x, y, 1.5f, RngKey{}), std::logic_error);
}

}  // namespace activations_test
}  // namespace megatron::test_support
