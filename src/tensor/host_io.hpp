// Moving tensors between a Backend and host vectors of f32 (or i32), converting 16-bit floats:
// what tests, checkpoints and the data loader use. Synchronous.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/backend.hpp"

namespace megatron::tensor {

std::vector<float> to_floats(Backend& backend, const Tensor& x);  // any float dtype
std::vector<int32_t> to_ints(Backend& backend, const Tensor& x);  // i32
// A new tensor of `dtype` holding `values` (rounded to the dtype).
Tensor from_floats(Backend& backend, std::span<const float> values, const Shape& shape,
                   DType dtype = DType::F32);
Tensor from_ints(Backend& backend, std::span<const int32_t> values, const Shape& shape);
// Overwrites x (any float dtype) with values.
void write_floats(Backend& backend, Tensor& x, std::span<const float> values);

}  // namespace megatron::tensor
