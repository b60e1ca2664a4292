// The multi-tensor ops against the CPU backend's one-tensor-at-a-time defaults: AdamW over
// hundreds of parameters (more than one launch holds, one split across launches), with the
// copy into 16-bit weights fused in, and the gradient norm's sum of squares.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace multi_tensor_test {

using tensor::AdamWParam;

class CudaMultiTensorTest : public CudaOpTest {
 protected:
  // Sizes that exercise the launch split: many small tensors (more than one launch's table),
  // an empty one, and one of more chunks than a launch has blocks.
  std::vector<int64_t> sizes() {
    std::vector<int64_t> out;
    for (int i = 0; i < 150; ++i) out.push_back(1 + (i * 7919) % 3000);
    out.push_back(0);
    out.push_back(320 * 65536 + 12345);
    out.push_back(77);
    return out;
  }
};

// The GPU kernel does the CPU's arithmetic operation for operation without fused
// multiply-adds; 1e-6 relative allows a compiler's contraction on either side.
TEST_F(CudaMultiTensorTest, AdamWOverManyTensorsMatchesTheCpu) {
  std::vector<Pair> master, grad, m, v, value;
  std::vector<AdamWParam> on_cpu, on_gpu;
  uint32_t seed = 10;
  for (int64_t n : sizes()) {
    const bool sixteen_bit = n % 2 == 1;
    master.push_back(random({n}, DType::F32, seed++));
    grad.push_back(random({n}, DType::F32, seed++, 0.1f));
    m.push_back(random({n}, DType::F32, seed++, 0.01f));
    Pair vv = random({n}, DType::F32, seed++, 0.01f);
    // v is a running mean of squares: non-negative.
    std::vector<float> squares = tensor::to_floats(cpu(), vv.cpu);
    for (float& x : squares) x = x * x;
    v.push_back(make(squares, {n}, DType::F32));
    value.push_back(sixteen_bit ? empty({n}, DType::Bf16) : Pair{});
    const float decay = n % 3 == 0 ? 0.0f : 0.1f;
    on_cpu.push_back({master.back().cpu, grad.back().cpu, m.back().cpu, v.back().cpu,
                      value.back().cpu, decay});
    on_gpu.push_back({master.back().gpu, grad.back().gpu, m.back().gpu, v.back().gpu,
                      value.back().gpu, decay});
  }
  const tensor::AdamWStep step{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .step = 3, .grad_scale = 0.5f};
  cpu().adamw_update_many(on_cpu, step);
  gpu().adamw_update_many(on_gpu, step);
  for (size_t i = 0; i < master.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    expect_close(master[i], 1e-6, 0.0, "master");
    expect_close(m[i], 1e-6, 0.0, "m");
    expect_close(v[i], 1e-6, 0.0, "v");
    if (value[i].cpu.defined()) expect_close(value[i], tolerance_for(DType::Bf16), 0.0, "value");
  }
}

// f64 accumulation on both sides, in different orders: relative 1e-12.
TEST_F(CudaMultiTensorTest, SumOfSquaresOverManyTensorsMatchesTheCpu) {
  std::vector<Tensor> on_cpu, on_gpu;
  uint32_t seed = 100;
  for (int64_t n : sizes()) {
    const DType dtype = n % 3 == 0 ? DType::Bf16 : DType::F32;
    Pair x = random({n}, dtype, seed++);
    on_cpu.push_back(x.cpu);
    on_gpu.push_back(x.gpu);
  }
  const double want = cpu().sum_squares_many(on_cpu);
  EXPECT_NEAR(gpu().sum_squares_many(on_gpu), want, 1e-12 * want);
}

TEST_F(CudaMultiTensorTest, SumOfSquaresIsTheSameEveryTime) {
  Pair x = random({5'000'000}, DType::F32, 7);
  const std::vector<Tensor> xs{x.gpu, x.gpu};
  const double first = gpu().sum_squares_many(xs);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gpu().sum_squares_many(xs), first);
}

TEST_F(CudaMultiTensorTest, ANonFiniteGradientMakesTheSumNonFinite) {
  std::vector<float> values(1000, 1.0f);
  values[517] = std::numeric_limits<float>::infinity();
  Pair x = make(values, {1000});
  const std::vector<Tensor> xs{x.gpu};
  EXPECT_FALSE(std::isfinite(gpu().sum_squares_many(xs)));
}

}  // namespace multi_tensor_test
}  // namespace megatron::test_support
