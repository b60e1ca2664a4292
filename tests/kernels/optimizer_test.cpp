// The CUDA backend's normal initialisation and AdamW and SGD updates against the CPU backend on
// the same random states; every test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "tensor/backend.hpp"

namespace megatron::test_support {
namespace optimizer_test {

using tensor::AdamWStep;
using tensor::RngKey;
using tensor::SgdStep;

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};
// Not a multiple of the block, of the 8-element vectors or of a Philox block of 4.
constexpr int64_t kN = 100003;

std::string dtype_name(DType dtype) { return std::string(tensor::name(dtype)); }

class CudaOptimizerTest : public CudaOpTest {
 protected:
  // Non-negative second moments, as AdamW's v always is.
  Pair second_moments(uint32_t seed) {
    std::vector<float> v = random_floats(static_cast<size_t>(kN), seed, 0.01f);
    for (float& x : v) x = x * x;
    return make(v, {kN});
  }
};

// --- normal --------------------------------------------------------------------------------------
// The same Philox words and Box-Muller arithmetic; the CUDA library's logf, sqrtf and sincosf
// may differ from glibc's in the last ulp, so f32 values agree within a few ulps (the
// tolerance's 1e-5 of the largest value), and 16-bit values may round to the neighbour.

TEST_F(CudaOptimizerTest, NormalDrawsTheCpuValuesInEachDtype) {
  const RngKey key{.seed = 42, .stream = 0x1234567890ull, .offset = 0};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair x = empty({kN}, dtype);
    cpu().normal(x.cpu, 0.5f, 2.0f, key);
    gpu().normal(x.gpu, 0.5f, 2.0f, key);
    expect_close(x, tolerance_for(dtype));
  }
}

// A shard of a tensor starting at any element (offsets that split Philox blocks included) draws
// what the CPU draws for the same numbering.
TEST_F(CudaOptimizerTest, NormalAtAnOffsetDrawsTheCpuValues) {
  for (uint64_t offset : {1, 2, 3, 4, 1001}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const RngKey key{.seed = 7, .stream = 8, .offset = offset};
    Pair x = empty({kN}, DType::F32);
    cpu().normal(x.cpu, 0.0f, 0.02f, key);
    gpu().normal(x.gpu, 0.0f, 0.02f, key);
    // Values up to 0.02 * 5.8 (f32 ulp 7e-9): 1e-7 absolute is a dozen ulps, far below the
    // 1e-5 that tolerance_for would allow at this scale or the 0.02 of a wrong draw.
    expect_close(x, 0.0, 1e-7);
  }
}

TEST_F(CudaOptimizerTest, NormalIntoAMisalignedSliceDrawsTheCpuValues) {
  const RngKey key{.seed = 9, .stream = 10, .offset = 6};
  Pair whole = zeros({kN}, DType::F32);
  Pair part{whole.cpu.slice(1, kN), whole.gpu.slice(1, kN)};
  cpu().normal(part.cpu, 1.0f, 1.0f, key);
  gpu().normal(part.gpu, 1.0f, 1.0f, key);
  expect_close(whole, tolerance_for(DType::F32));
}

// --- AdamW ---------------------------------------------------------------------------------------
// The CPU's arithmetic in the CPU's order; the GPU fuses multiply-adds, so m, v and the weights
// agree within an f32 ulp or two.

TEST_F(CudaOptimizerTest, AdamwUpdateMatchesTheCpuForEachGradientDtype) {
  const AdamWStep step{.lr = 1e-2f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .weight_decay = 0.1f,
                       .step = 3,
                       .grad_scale = 0.5f};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair master = random({kN}, DType::F32, 1), m = random({kN}, DType::F32, 2, 0.01f);
    Pair v = second_moments(3);
    const Pair grad = random({kN}, dtype, 4);
    cpu().adamw_update(master.cpu, grad.cpu, m.cpu, v.cpu, step);
    gpu().adamw_update(master.gpu, grad.gpu, m.gpu, v.gpu, step);
    expect_close(master, tolerance_for(DType::F32), 0.0, "master");
    expect_close(m, tolerance_for(DType::F32), 0.0, "m");
    expect_close(v, tolerance_for(DType::F32), 0.0, "v");
  }
}

// The first step from zero moments: the bias corrections are largest.
TEST_F(CudaOptimizerTest, AdamwFirstStepFromZeroMomentsMatchesTheCpu) {
  const AdamWStep step{.lr = 3e-4f, .weight_decay = 0.01f, .step = 1};
  Pair master = random({kN}, DType::F32, 5);
  Pair m = zeros({kN}, DType::F32), v = zeros({kN}, DType::F32);
  const Pair grad = random({kN}, DType::Bf16, 6);
  cpu().adamw_update(master.cpu, grad.cpu, m.cpu, v.cpu, step);
  gpu().adamw_update(master.gpu, grad.gpu, m.gpu, v.gpu, step);
  expect_close(master, tolerance_for(DType::F32), 0.0, "master");
}

TEST_F(CudaOptimizerTest, AdamwRejectsA16BitMoment) {
  Tensor master = gpu().zeros({8}, DType::F32), v = gpu().zeros({8}, DType::F32);
  Tensor m = gpu().zeros({8}, DType::Bf16);
  const Tensor grad = gpu().zeros({8}, DType::F32);
  EXPECT_THROW(gpu().adamw_update(master, grad, m, v, AdamWStep{.lr = 1e-3f}), std::logic_error);
}

TEST_F(CudaOptimizerTest, AdamwRejectsStepZero) {
  Tensor master = gpu().zeros({8}, DType::F32), m = gpu().zeros({8}, DType::F32);
  Tensor v = gpu().zeros({8}, DType::F32);
  const Tensor grad = gpu().zeros({8}, DType::F32);
  EXPECT_THROW(gpu().adamw_update(master, grad, m, v, AdamWStep{.lr = 1e-3f, .step = 0}),
               std::logic_error);
}

// --- SGD -----------------------------------------------------------------------------------------

TEST_F(CudaOptimizerTest, SgdWithMomentumUpdatesWeightsAndBufferAsTheCpu) {
  const SgdStep step{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f, .grad_scale = 0.25f};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Pair master = random({kN}, DType::F32, 7), buffer = random({kN}, DType::F32, 8);
    const Pair grad = random({kN}, dtype, 9);
    cpu().sgd_update(master.cpu, grad.cpu, buffer.cpu, step);
    gpu().sgd_update(master.gpu, grad.gpu, buffer.gpu, step);
    expect_close(master, tolerance_for(DType::F32), 0.0, "master");
    expect_close(buffer, tolerance_for(DType::F32), 0.0, "momentum buffer");
  }
}

// With momentum 0 there is no buffer: an undefined tensor is accepted and nothing else written.
TEST_F(CudaOptimizerTest, SgdWithoutMomentumNeedsNoBuffer) {
  const SgdStep step{.lr = 0.1f, .weight_decay = 0.0f};
  Pair master = random({kN}, DType::F32, 10);
  const Pair grad = random({kN}, DType::F16, 11);
  Tensor no_buffer_cpu, no_buffer_gpu;
  cpu().sgd_update(master.cpu, grad.cpu, no_buffer_cpu, step);
  gpu().sgd_update(master.gpu, grad.gpu, no_buffer_gpu, step);
  expect_close(master, tolerance_for(DType::F32), 0.0, "master");
}

TEST_F(CudaOptimizerTest, SgdRejectsAGradientOfAnotherSize) {
  Tensor master = gpu().zeros({8}, DType::F32), buffer = gpu().zeros({8}, DType::F32);
  const Tensor grad = gpu().zeros({9}, DType::F32);
  EXPECT_THROW(gpu().sgd_update(master, grad, buffer, SgdStep{.lr = 0.1f, .momentum = 0.9f}),
               std::logic_error);
}

}  // namespace optimizer_test
}  // namespace megatron::test_support
