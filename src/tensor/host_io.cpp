#include "tensor/host_io.hpp"

#include <stdexcept>

namespace megatron::tensor {
namespace {

void check_size(const Tensor& x, size_t n) {
  if (static_cast<size_t>(x.numel()) != n) {
    throw std::logic_error("host_io: " + std::to_string(n) + " values for a tensor of shape " +
                           to_string(x.shape()));
  }
}

}  // namespace

std::vector<float> to_floats(Backend& backend, const Tensor& x) {
  std::vector<float> out(static_cast<size_t>(x.numel()));
  if (x.dtype() == DType::F32) {
    backend.read(x, out.data());
    return out;
  }
  std::vector<uint16_t> raw(out.size());
  backend.read(x, raw.data());
  if (x.dtype() == DType::Bf16) {
    convert(std::span(reinterpret_cast<const bf16*>(raw.data()), raw.size()), std::span(out));
  } else if (x.dtype() == DType::F16) {
    convert(std::span(reinterpret_cast<const f16*>(raw.data()), raw.size()), std::span(out));
  } else {
    throw std::logic_error("host_io: to_floats of a " + std::string(name(x.dtype())) + " tensor");
  }
  return out;
}

std::vector<int32_t> to_ints(Backend& backend, const Tensor& x) {
  if (x.dtype() != DType::I32) throw std::logic_error("host_io: to_ints of a non-i32 tensor");
  std::vector<int32_t> out(static_cast<size_t>(x.numel()));
  backend.read(x, out.data());
  return out;
}

void write_floats(Backend& backend, Tensor& x, std::span<const float> values) {
  check_size(x, values.size());
  if (x.dtype() == DType::F32) {
    backend.write(x, values.data());
    return;
  }
  std::vector<uint16_t> raw(values.size());
  if (x.dtype() == DType::Bf16) {
    convert(values, std::span(reinterpret_cast<bf16*>(raw.data()), raw.size()));
  } else if (x.dtype() == DType::F16) {
    convert(values, std::span(reinterpret_cast<f16*>(raw.data()), raw.size()));
  } else {
    throw std::logic_error("host_io: write_floats to a " + std::string(name(x.dtype())) +
                           " tensor");
  }
  backend.write(x, raw.data());
}

Tensor from_floats(Backend& backend, std::span<const float> values, const Shape& shape,
                   DType dtype) {
  Tensor x = backend.empty(shape, dtype);
  write_floats(backend, x, values);
  return x;
}

Tensor from_ints(Backend& backend, std::span<const int32_t> values, const Shape& shape) {
  Tensor x = backend.empty(shape, DType::I32);
  check_size(x, values.size());
  backend.write(x, values.data());
  return x;
}

}  // namespace megatron::tensor
