// ckpt::raw_elements: float arrays handled as bytes of their dtype.
#include "ckpt/raw_elements.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "tensor/half.hpp"

namespace megatron::ckpt {
namespace {

using tensor::DType;

// `values` stored as `dtype`.
std::vector<std::byte> stored(const std::vector<float>& values, DType dtype) {
  std::vector<std::byte> f32(values.size() * 4);
  std::memcpy(f32.data(), values.data(), f32.size());
  return convert_elements(f32, DType::F32, dtype);
}

TEST(RawElements, FirstNonFiniteFindsNanAndInfinityInEveryFloatDtype) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dtype : {DType::F32, DType::Bf16, DType::F16}) {
    EXPECT_EQ(first_non_finite(stored({1.0f, -2.0f, 0.0f, 65504.0f}, dtype), dtype), -1);
    EXPECT_EQ(first_non_finite(stored({1.0f, nan, 3.0f}, dtype), dtype), 1);
    EXPECT_EQ(first_non_finite(stored({1.0f, 2.0f, -inf}, dtype), dtype), 2);
  }
}

}  // namespace
}  // namespace megatron::ckpt
