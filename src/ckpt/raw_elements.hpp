// Arrays of raw float elements (f32, bf16, f16) as bytes: converting between dtypes and
// transposing, element-size generic, so interop code moves weights without an f32 detour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/dtype.hpp"

namespace megatron::ckpt {

// `in` as elements of `from`, rounded (to nearest even) to `to`; a copy when they are equal.
std::vector<std::byte> convert_elements(std::span<const std::byte> in, tensor::DType from,
                                        tensor::DType to);

// Every element of `bytes` (of `dtype`) times `factor`, rounded back to `dtype`.
void scale_elements(std::span<std::byte> bytes, tensor::DType dtype, double factor);

// The index of the first NaN or infinite element of `bytes` (of float dtype `dtype`), or -1.
int64_t first_non_finite(std::span<const std::byte> bytes, tensor::DType dtype);

// in [rows, cols] -> [cols, rows], elements of `element_size` bytes.
std::vector<std::byte> transpose_elements(std::span<const std::byte> in, int64_t rows, int64_t cols,
                                          size_t element_size);

}  // namespace megatron::ckpt
