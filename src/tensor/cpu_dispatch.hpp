// Internal to the CPU backend: typed element access for f32/bf16/f16 storage and the checks
// every op makes on its arguments.
#pragma once

#include <stdexcept>
#include <string>

#include "tensor/tensor.hpp"

namespace megatron::tensor::cpu {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const bf16* p, int64_t i) { return to_float(p[i]); }
inline float load(const f16* p, int64_t i) { return to_float(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(bf16* p, int64_t i, float v) { p[i] = to_bf16(v); }
inline void store(f16* p, int64_t i, float v) { p[i] = to_f16(v); }

// Calls fn(pointer) with x's elements typed as float, bf16 or f16.
template <typename Fn>
decltype(auto) with_floats(const Tensor& x, Fn&& fn) {
  switch (x.dtype()) {
    case DType::F32: return fn(x.data<float>());
    case DType::Bf16: return fn(x.data<bf16>());
    case DType::F16: return fn(x.data<f16>());
    default: break;
  }
  throw std::logic_error("cpu backend: expected a float tensor, got " +
                         std::string(name(x.dtype())));
}

[[noreturn]] inline void fail(const std::string& op, const std::string& what) {
  throw std::logic_error("cpu backend: " + op + ": " + what);
}

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) fail(op, what);
}

inline void require_numel(const Tensor& a, const Tensor& b, const char* op) {
  if (a.numel() != b.numel()) {
    fail(op, "shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) + " differ");
  }
}

}  // namespace megatron::tensor::cpu
