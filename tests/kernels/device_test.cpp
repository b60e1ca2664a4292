// The CUDA toolchain is wired for real: a kernel compiled by nvcc runs and matches the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/device.hpp"

namespace megatron::kernels {
namespace device_test {

TEST(CudaDevice, ReportsNoDeviceWithoutFailingWhenNoneIsPresent) {
  const int count = device_count();
  EXPECT_GE(count, 0);
  if (count == 0) EXPECT_TRUE(device_description(0).empty());
}

TEST(CudaDevice, AxpyKernelMatchesTheCpu) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  SCOPED_TRACE(device_description(0));
  const std::size_t n = 100003;  // not a multiple of the block size
  std::vector<float> x(n), y(n), expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
    y[i] = static_cast<float>(i % 31) * -0.5f + 3.0f;
    expected[i] = 1.5f * x[i] + y[i];
  }
  ASSERT_TRUE(axpy_on_device(1.5f, x.data(), y.data(), n));
  // One fused multiply-add against the CPU's multiply then add: within 1 ulp-ish.
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], expected[i], 1e-5f * (1 + std::abs(expected[i]))) << i;
}

}  // namespace device_test
}  // namespace megatron::kernels
