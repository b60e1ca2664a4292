// Tensor: a typed, shaped, contiguous view into a reference-counted buffer on one device.
// Views (row slices, reshapes) share the buffer; only a Backend allocates or touches elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/half.hpp"

namespace megatron::tensor {

using Shape = std::vector<int64_t>;

std::string to_string(const Shape& shape);  // "[4, 128, 768]"
int64_t numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // `buffer` owns at least offset_bytes + numel(shape) * size_of(dtype) bytes.
  Tensor(std::shared_ptr<std::byte> buffer, size_t offset_bytes, Shape shape, DType dtype,
         Device device);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const;  // negative counts from the end
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * size_of(dtype_); }
  // Elements per row of the first dimension (numel / dim(0)); 1 for a scalar.
  int64_t row_size() const;

  // Rows [begin, end) of the first dimension, sharing the buffer.
  Tensor slice(int64_t begin, int64_t end) const;
  // The same elements under another shape of equal numel; one dimension may be -1.
  Tensor view(Shape shape) const;
  Tensor flat() const { return view({numel_}); }

  // Device address of the first element. Host code may dereference it only on the CPU.
  void* raw() const { return buffer_.get() + offset_; }
  // Typed host pointer: checks that the tensor lives on the CPU and holds T.
  template <typename T>
  T* data() const;

  bool same_storage(const Tensor& other) const { return buffer_ == other.buffer_; }

 private:
  void check_host(DType expected) const;

  std::shared_ptr<std::byte> buffer_;
  size_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::Cpu;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::F32; }
template <>
constexpr DType dtype_of<bf16>() { return DType::Bf16; }
template <>
constexpr DType dtype_of<f16>() { return DType::F16; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::I64; }

template <typename T>
T* Tensor::data() const {
  check_host(dtype_of<T>());
  return reinterpret_cast<T*>(raw());
}

}  // namespace megatron::tensor
