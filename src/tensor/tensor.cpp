#include "tensor/tensor.hpp"

#include <stdexcept>

namespace megatron::tensor {

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor::Tensor(std::shared_ptr<std::byte> buffer, size_t offset_bytes, Shape shape, DType dtype,
               Device device)
    : buffer_(std::move(buffer)),
      offset_(offset_bytes),
      shape_(std::move(shape)),
      numel_(tensor::numel(shape_)),
      dtype_(dtype),
      device_(device) {
  for (int64_t d : shape_) {
    if (d < 0) throw std::logic_error("tensor: negative dimension in " + to_string(shape_));
  }
}

int64_t Tensor::dim(int64_t i) const {
  const int64_t r = rank();
  if (i < 0) i += r;
  if (i < 0 || i >= r) {
    throw std::logic_error("tensor: dimension " + std::to_string(i) + " of shape " +
                           to_string(shape_));
  }
  return shape_[static_cast<size_t>(i)];
}

int64_t Tensor::row_size() const {
  if (shape_.empty() || shape_[0] == 0) return shape_.empty() ? 1 : 0;
  return numel_ / shape_[0];
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0]) {
    throw std::logic_error("tensor: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") of shape " + to_string(shape_));
  }
  Shape shape = shape_;
  shape[0] = end - begin;
  const size_t offset = offset_ + static_cast<size_t>(begin * row_size()) * size_of(dtype_);
  return Tensor(buffer_, offset, std::move(shape), dtype_, device_);
}

Tensor Tensor::view(Shape shape) const {
  int64_t known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0 && numel_ % known == 0) shape[static_cast<size_t>(infer)] = numel_ / known;
  if (tensor::numel(shape) != numel_) {
    throw std::logic_error("tensor: cannot view " + to_string(shape_) + " as " + to_string(shape));
  }
  return Tensor(buffer_, offset_, std::move(shape), dtype_, device_);
}

void Tensor::check_host(DType expected) const {
  if (device_ != Device::Cpu) throw std::logic_error("tensor: host access to a device tensor");
  if (dtype_ != expected) {
    throw std::logic_error("tensor: holds " + std::string(name(dtype_)) + ", read as " +
                           std::string(name(expected)));
  }
}

}  // namespace megatron::tensor
