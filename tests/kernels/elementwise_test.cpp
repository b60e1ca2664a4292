// The CUDA backend's fill, copy (casts), add, axpy, scale, bias add and bias gradient against the
// CPU backend on the same random inputs; every test skips without a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace elementwise_test {

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};
// Not a multiple of the 256-thread block nor of the kernels' 8-element vectors: the scalar tail
// runs too.
constexpr int64_t kN = 100003;

std::string dtype_name(DType dtype) { return std::string(tensor::name(dtype)); }

class CudaElementwiseTest : public CudaOpTest {
 protected:
  // Elements [1, n) of a one-dimensional tensor: 4 or 2 bytes past a 16-byte boundary, so the
  // kernels take their element-by-element path instead of 16-byte vectors.
  static Pair misaligned(const Pair& t) {
    return {t.cpu.slice(1, t.cpu.dim(0)), t.gpu.slice(1, t.gpu.dim(0))};
  }
};

// --- fill ----------------------------------------------------------------------------------------

TEST_F(CudaElementwiseTest, FillWritesTheValueRoundedToEachFloatDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair x = random({kN}, dtype, 1);
    cpu().fill(x.cpu, 0.3);
    gpu().fill(x.gpu, 0.3);
    expect_equal(x);
  }
}

TEST_F(CudaElementwiseTest, FillWithZeroClearsEveryElement) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair x = random({kN}, dtype, 2);
    cpu().fill(x.cpu, 0.0);
    gpu().fill(x.gpu, 0.0);
    expect_equal(x);
  }
}

TEST_F(CudaElementwiseTest, FillWritesIntegersIntoI32AndI64Tensors) {
  for (DType dtype : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair x = empty({kN}, dtype);
    cpu().fill(x.cpu, -7.0);
    gpu().fill(x.gpu, -7.0);
    expect_equal(x);
  }
}

TEST_F(CudaElementwiseTest, FillOfAMisalignedSliceWritesOnlyTheSlice) {
  Pair whole = random({kN}, DType::Bf16, 3);
  Pair part = misaligned(whole);
  cpu().fill(part.cpu, -2.5);
  gpu().fill(part.gpu, -2.5);
  expect_equal(whole);
}

// --- copy ----------------------------------------------------------------------------------------

// Random values over a wide range, and every special case of the roundings: ties to even in bf16
// and f16, the f16 overflow threshold (65520 rounds to infinity, 65519 to 65504), f16 and f32
// subnormals, signed zeros, infinities and NaNs with payloads.
std::vector<float> cast_inputs() {
  std::vector<float> v = random_floats(size_t(kN), 4, 1000.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0xFFC12345u),  // negative NaN with a payload
                            std::bit_cast<float>(0x7F800001u),  // signalling NaN
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -1e6f,
                            1.0f + 0x1p-8f,   // bf16 tie, rounds down to even
                            1.0f + 0x3p-8f,   // bf16 tie, rounds up to even
                            1.0f + 0x1p-11f,  // f16 tie
                            0x1p-24f,         // smallest f16 subnormal
                            0x1p-25f,         // half of it: ties to zero
                            0x3p-26f,         // rounds up to the smallest subnormal
                            0x1.ffcp-15f,     // just below the smallest f16 normal
                            1e-40f,           // f32 subnormal
                            -1e-40f,
                            0x1p-130f};
  for (size_t k = 0; k < std::size(specials); ++k) v[k * 997 + 5] = specials[k];
  // And the last element, which the scalar tail converts.
  v.back() = std::numeric_limits<float>::quiet_NaN();
  return v;
}

TEST_F(CudaElementwiseTest, CopyConvertsBetweenFloatDtypesBitForBit) {
  const std::vector<float> values = cast_inputs();
  for (DType from : kFloatTypes) {
    for (DType to : kFloatTypes) {
      SCOPED_TRACE(dtype_name(from) + " to " + dtype_name(to));
      const Pair src = make(values, {kN}, from);
      Pair dst = empty({kN}, to);
      cpu().copy(src.cpu, dst.cpu);
      gpu().copy(src.gpu, dst.gpu);
      expect_equal(dst);
    }
  }
}

TEST_F(CudaElementwiseTest, CopyOfMisalignedSlicesConvertsBitForBit) {
  const std::vector<float> values = cast_inputs();
  const Pair src = misaligned(make(values, {kN}, DType::F32));
  Pair dst = misaligned(zeros({kN}, DType::Bf16));
  cpu().copy(src.cpu, dst.cpu);
  gpu().copy(src.gpu, dst.gpu);
  expect_equal(dst);
}

TEST_F(CudaElementwiseTest, CopyOfI32TensorsCopiesTheBytes) {
  std::mt19937 rng(5);
  std::vector<int32_t> ids(static_cast<size_t>(kN));
  for (int32_t& id : ids) id = int32_t(rng());
  const Pair src = make_ints(ids, {kN});
  Pair dst = empty({kN}, DType::I32);
  cpu().copy(src.cpu, dst.cpu);
  gpu().copy(src.gpu, dst.gpu);
  expect_equal(dst);
}

TEST_F(CudaElementwiseTest, CopyRejectsACastBetweenIntegerAndFloat) {
  const Tensor ids = gpu().zeros({16}, DType::I32);
  Tensor out = gpu().empty({16}, DType::F32);
  EXPECT_THROW(gpu().copy(ids, out), std::logic_error);
}

TEST_F(CudaElementwiseTest, CopyRejectsTensorsOfDifferentSizes) {
  const Tensor a = gpu().zeros({16}, DType::F32);
  Tensor b = gpu().empty({17}, DType::Bf16);
  EXPECT_THROW(gpu().copy(a, b), std::logic_error);
}

// --- add, axpy, scale ----------------------------------------------------------------------------

// One f32 addition of the same two values, then one rounding to out's dtype: bit for bit.
TEST_F(CudaElementwiseTest, AddMatchesTheCpuBitForBitForEveryDtypeCombination) {
  for (DType da : kFloatTypes) {
    for (DType db : kFloatTypes) {
      for (DType dout : kFloatTypes) {
        SCOPED_TRACE(dtype_name(da) + " + " + dtype_name(db) + " -> " + dtype_name(dout));
        const Pair a = random({kN}, da, 6), b = random({kN}, db, 7);
        Pair out = empty({kN}, dout);
        cpu().add(a.cpu, b.cpu, out.cpu);
        gpu().add(a.gpu, b.gpu, out.gpu);
        expect_equal(out);
      }
    }
  }
}

TEST_F(CudaElementwiseTest, AddMayWriteIntoEitherInput) {
  Pair a = random({kN}, DType::F32, 8), b = random({kN}, DType::Bf16, 9);
  cpu().add(a.cpu, b.cpu, a.cpu);
  gpu().add(a.gpu, b.gpu, a.gpu);
  expect_equal(a, "out = a");
  cpu().add(a.cpu, b.cpu, b.cpu);
  gpu().add(a.gpu, b.gpu, b.gpu);
  expect_equal(b, "out = b");
}

TEST_F(CudaElementwiseTest, AddOfMisalignedSlicesMatchesTheCpu) {
  const Pair a = misaligned(random({kN}, DType::F32, 10));
  const Pair b = misaligned(random({kN}, DType::F16, 11));
  Pair out = misaligned(empty({kN}, DType::F32));
  cpu().add(a.cpu, b.cpu, out.cpu);
  gpu().add(a.gpu, b.gpu, out.gpu);
  expect_equal(out);
}

TEST_F(CudaElementwiseTest, AddRejectsTensorsOfDifferentSizes) {
  Tensor out = gpu().zeros({4}, DType::F32);
  EXPECT_THROW(gpu().add(gpu().zeros({4}, DType::F32), gpu().zeros({5}, DType::F32), out),
               std::logic_error);
}

// The GPU fuses y + alpha x into one multiply-add (one rounding, not two): within an f32 ulp,
// which a 16-bit y may turn into one ulp of its own; tolerance_for allows two.
TEST_F(CudaElementwiseTest, AxpyAddsAlphaTimesXToY) {
  for (DType dx : kFloatTypes) {
    for (DType dy : kFloatTypes) {
      SCOPED_TRACE(dtype_name(dx) + " into " + dtype_name(dy));
      const Pair x = random({kN}, dx, 12);
      Pair y = random({kN}, dy, 13);
      cpu().axpy(-0.37f, x.cpu, y.cpu);
      gpu().axpy(-0.37f, x.gpu, y.gpu);
      expect_close(y, tolerance_for(dy));
    }
  }
}

// One f32 multiplication, one rounding: bit for bit.
TEST_F(CudaElementwiseTest, ScaleMultipliesInPlaceBitForBit) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair x = random({kN}, dtype, 14);
    cpu().scale(x.cpu, 1.7f);
    gpu().scale(x.gpu, 1.7f);
    expect_equal(x);
  }
}

// --- bias ----------------------------------------------------------------------------------------

// Rows of 771 (not a multiple of 8: element by element) and of 1024 (16-byte vectors); one
// addition per element, so bit for bit.
TEST_F(CudaElementwiseTest, BiasAddAddsTheBiasToEveryRowBitForBit) {
  for (const Shape& shape : {Shape{37, 771}, Shape{3, 11, 1024}}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(tensor::to_string(shape) + " " + dtype_name(dtype));
      Pair x = random(shape, dtype, 15);
      const Pair bias = random({shape.back()}, DType::F32, 16);
      cpu().bias_add(x.cpu, bias.cpu);
      gpu().bias_add(x.gpu, bias.gpu);
      expect_equal(x);
    }
  }
}

TEST_F(CudaElementwiseTest, BiasAddTakesABiasOfAnotherDtype) {
  Pair x = random({29, 512}, DType::F32, 17);
  const Pair bias = random({512}, DType::Bf16, 18);
  cpu().bias_add(x.cpu, bias.cpu);
  gpu().bias_add(x.gpu, bias.gpu);
  expect_equal(x);
}

TEST_F(CudaElementwiseTest, BiasAddRejectsABiasOfTheWrongLength) {
  Tensor x = gpu().zeros({4, 6}, DType::F32);
  EXPECT_THROW(gpu().bias_add(x, gpu().zeros({4}, DType::F32)), std::logic_error);
}

// Column sums of 4099 rows in f32, in another order than the CPU's: the rounding errors grow
// like sqrt(rows) ulps of sums of size ~64 (1e-4 at most), well inside 1e-5 of the largest
// result (~200).
TEST_F(CudaElementwiseTest, BiasGradAccumulatesColumnSumsIntoANonZeroGradient) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Pair dy = random({4099, 771}, dtype, 19);
    Pair dbias = random({771}, DType::F32, 20, 10.0f);
    cpu().bias_grad(dy.cpu, dbias.cpu);
    gpu().bias_grad(dy.gpu, dbias.gpu);
    expect_close(dbias, tolerance_for(DType::F32));
  }
}

// 20 rows: one pass, no partial sums in the workspace.
TEST_F(CudaElementwiseTest, BiasGradOfFewRowsAccumulates) {
  const Pair dy = random({20, 4100}, DType::Bf16, 21);
  Pair dbias = random({4100}, DType::F32, 22);
  cpu().bias_grad(dy.cpu, dbias.cpu);
  gpu().bias_grad(dy.gpu, dbias.gpu);
  expect_close(dbias, tolerance_for(DType::F32));
}

TEST_F(CudaElementwiseTest, BiasGradIsBitwiseRepeatable) {
  const Pair dy = random({8191, 65}, DType::F32, 23);
  Pair first = zeros({65}, DType::F32), second = zeros({65}, DType::F32);
  gpu().bias_grad(dy.gpu, first.gpu);
  gpu().bias_grad(dy.gpu, second.gpu);
  EXPECT_EQ(tensor::to_floats(gpu(), first.gpu), tensor::to_floats(gpu(), second.gpu));
}

TEST_F(CudaElementwiseTest, BiasGradRejectsA16BitGradient) {
  const Tensor dy = gpu().zeros({4, 6}, DType::F32);
  Tensor dbias = gpu().zeros({6}, DType::Bf16);
  EXPECT_THROW(gpu().bias_grad(dy, dbias), std::logic_error);
}

}  // namespace elementwise_test
}  // namespace megatron::test_support
