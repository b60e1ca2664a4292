// Element types and devices a Tensor can have. 16-bit floats are storage types only: every op
// computes in f32 (see half.hpp for the conversions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace megatron::tensor {

enum class DType : uint8_t { F32, Bf16, F16, I32, I64 };
enum class Device : uint8_t { Cpu, Cuda };

constexpr size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::Bf16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::F32 || dtype == DType::Bf16 || dtype == DType::F16;
}

constexpr std::string_view name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::Bf16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

constexpr std::string_view name(Device device) { return device == Device::Cpu ? "cpu" : "cuda"; }

}  // namespace megatron::tensor
