// The GPU op harness: every CUDA op runs on the same random inputs as the CPU backend (the
// oracle) and the two results are compared with a tolerance stated per dtype. Without a GPU
// every test here skips with a message (never a silent pass).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ops/finite_difference.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/cuda_backend.hpp"
#include "tensor/host_io.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::test_support {

using tensor::Backend;
using tensor::CpuBackend;
using tensor::CudaBackend;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// N(0, scale^2) draws from `seed`: the op harness's, so both draw the same inputs.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  return random_values(n, seed, scale);
}

// Relative tolerance for a result computed in f32 from inputs stored in `dtype` and written
// back in `dtype`: f32 results differ only in summation order and fused multiply-adds;
// 16-bit outputs may round to the neighbouring value (bf16 has 8 significant bits, f16 11).
constexpr double tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::Bf16: return 1.0 / 64;   // two bf16 ulps
    case DType::F16: return 1.0 / 512;   // two f16 ulps
    default: return 1e-5;
  }
}

class CudaOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tensor::cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
    }
    gpu_ = std::make_unique<CudaBackend>(gpu_options());
  }

  // What the GPU backend under test is built with (the flash-attention tests keep cuDNN off).
  virtual tensor::CudaOptions gpu_options() const { return {}; }
  CudaBackend& gpu() { return *gpu_; }
  CpuBackend& cpu() { return cpu_; }

  // The same values as a tensor on each backend.
  struct Pair {
    Tensor cpu, gpu;
  };
  Pair make(const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32) {
    return {tensor::from_floats(cpu_, values, shape, dtype),
            tensor::from_floats(*gpu_, values, shape, dtype)};
  }
  Pair make_ints(const std::vector<int32_t>& values, const Shape& shape) {
    return {tensor::from_ints(cpu_, values, shape), tensor::from_ints(*gpu_, values, shape)};
  }
  Pair random(const Shape& shape, DType dtype, uint32_t seed, float scale = 1.0f) {
    return make(random_floats(size_t(tensor::numel(shape)), seed, scale), shape, dtype);
  }
  Pair empty(const Shape& shape, DType dtype) {
    return {cpu_.empty(shape, dtype), gpu_->empty(shape, dtype)};
  }
  Pair zeros(const Shape& shape, DType dtype) {
    return {cpu_.zeros(shape, dtype), gpu_->zeros(shape, dtype)};
  }

  // Every element within rtol * max(1, max |cpu|) + atol of the CPU's: errors of f32 math
  // scale with the magnitude of the values around them, not with each element.
  void expect_close(const Pair& t, double rtol, double atol = 0.0, const char* what = "result") {
    const std::vector<float> want = tensor::to_floats(cpu_, t.cpu);
    const std::vector<float> got = tensor::to_floats(*gpu_, t.gpu);
    expect_close(got, want, rtol, atol, what);
  }
  static void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                           double rtol, double atol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 1.0;
    for (float w : want) scale = std::max(scale, double(std::abs(w)));
    const double tolerance = atol + rtol * scale;
    size_t failures = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
      if (!both_nan && !(std::abs(double(got[i]) - double(want[i])) <= tolerance) &&
          failures++ < 5) {
        ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << ", cpu " << want[i]
                      << " (tolerance " << tolerance << ")";
      }
    }
    EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << want.size()
                            << " elements differ";
  }
  // Bit-for-bit equality (integer results, dropout masks, casts).
  void expect_equal(const Pair& t, const char* what = "result") {
    std::vector<std::byte> want(t.cpu.bytes()), got(t.gpu.bytes());
    cpu_.read(t.cpu, want.data());
    gpu_->read(t.gpu, got.data());
    EXPECT_TRUE(want == got) << what << " differs from the CPU backend's bit for bit";
  }

 private:
  CpuBackend cpu_{1};
  std::unique_ptr<CudaBackend> gpu_;
};

}  // namespace megatron::test_support
