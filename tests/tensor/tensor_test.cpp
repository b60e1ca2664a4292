#include "tensor/tensor.hpp"

#include <gtest/gtest.h>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace tensor_test {

TEST(Tensor, ARowSliceSharesTheBufferWithoutCopying) {
  CpuBackend b(1);
  Tensor t = from_floats(b, std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.data<float>(), t.data<float>() + 2);
  rows.data<float>()[0] = 42;
  EXPECT_EQ(to_floats(b, t)[2], 42);
}

TEST(Tensor, AViewReshapesAndInfersOneDimension) {
  CpuBackend b(1);
  Tensor t = b.empty({4, 6}, DType::Bf16);
  EXPECT_EQ(t.view({2, -1, 3}).shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(t.view({2, -1, 3}).raw(), t.raw());
  EXPECT_THROW(t.view({5, -1}), std::logic_error);
}

TEST(Tensor, SlicesOutsideTheRowsAreRefused) {
  CpuBackend b(1);
  Tensor t = b.empty({3, 2}, DType::F32);
  EXPECT_THROW(t.slice(2, 4), std::logic_error);
  EXPECT_THROW(t.slice(2, 1), std::logic_error);
}

TEST(Tensor, TypedHostAccessChecksTheDtype) {
  CpuBackend b(1);
  Tensor t = b.empty({2}, DType::F16);
  EXPECT_NO_THROW(t.data<f16>());
  EXPECT_THROW(t.data<float>(), std::logic_error);
}

TEST(CpuBackendMemory, CountsLiveTensorsAndTheirPeak) {
  CpuBackend b(1);
  const int64_t base = b.memory().allocated_bytes;
  {
    Tensor a = b.empty({1000}, DType::F32);
    Tensor c = b.empty({500}, DType::Bf16);
    EXPECT_EQ(b.memory().allocated_bytes - base, 5000);
  }
  EXPECT_EQ(b.memory().allocated_bytes, base);
  EXPECT_GE(b.memory().peak_bytes - base, 5000);
  b.reset_peak_memory();
  EXPECT_EQ(b.memory().peak_bytes, base);
}

TEST(CpuBackendMemory, AFreedBufferIsReusedForTheSameSizeAndCanBeReleased) {
  CpuBackend b(1);
  void* first = nullptr;
  {
    Tensor a = b.empty({4096}, DType::F32);
    first = a.raw();
  }
  EXPECT_EQ(b.cached_bytes(), 4096 * 4);
  Tensor again = b.empty({1024}, DType::Bf16);
  EXPECT_NE(again.raw(), first) << "different byte size, different bucket";
  Tensor same = b.empty({4096}, DType::F32);
  EXPECT_EQ(same.raw(), first);
  EXPECT_EQ(b.cached_bytes(), 0);
  b.release_cached_memory();
}

TEST(CpuBackendMemory, EmptyTensorsCanBeReadAndWritten) {
  CpuBackend b(1);
  Tensor t = b.empty({0}, DType::F32);
  EXPECT_NO_THROW(b.read(t, nullptr));
  EXPECT_NO_THROW(b.write(t, nullptr));
}

}  // namespace tensor_test
}  // namespace megatron::tensor
