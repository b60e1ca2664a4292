// Shared by the kernel files: typed loads and stores of f32/bf16/f16 storage with f32 math,
// dtype dispatch, argument checks and launch-error reporting. Device code and light headers only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tensor/tensor.hpp"

namespace megatron::kernels {

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
// Round to nearest even, as tensor::to_bf16 and to_f16 do on the CPU.
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

// Calls fn(pointer) with x's device elements typed as float, __nv_bfloat16 or __half.
template <typename Fn>
decltype(auto) with_floats(const tensor::Tensor& x, Fn&& fn) {
  void* p = x.raw();
  switch (x.dtype()) {
    case tensor::DType::F32: return fn(static_cast<float*>(p));
    case tensor::DType::Bf16: return fn(static_cast<__nv_bfloat16*>(p));
    case tensor::DType::F16: return fn(static_cast<__half*>(p));
    default: break;
  }
  throw std::logic_error("cuda backend: expected a float tensor, got " +
                         std::string(tensor::name(x.dtype())));
}

[[noreturn]] inline void fail(const std::string& op, const std::string& what) {
  throw std::logic_error("cuda backend: " + op + ": " + what);
}

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) fail(op, what);
}

inline void require_numel(const tensor::Tensor& a, const tensor::Tensor& b, const char* op) {
  if (a.numel() != b.numel()) {
    fail(op, "shapes " + tensor::to_string(a.shape()) + " and " + tensor::to_string(b.shape()) +
                 " differ");
  }
}

inline void require_device(const tensor::Tensor& x, const char* op) {
  if (x.device() != tensor::Device::Cuda) fail(op, "expected a cuda tensor, got a cpu one");
}

// Throws std::runtime_error naming `what` when a CUDA call (or the last launch) failed.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("cuda backend: ") + what + ": " +
                             cudaGetErrorString(status));
  }
}
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

// Blocks for a grid-stride loop over n elements: enough to fill the device, never zero.
inline unsigned grid_for(int64_t n, unsigned threads = 256, unsigned max_blocks = 65535u * 4) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 1 ? 1 : (blocks > int64_t(max_blocks) ? max_blocks : blocks));
}

}  // namespace megatron::kernels
