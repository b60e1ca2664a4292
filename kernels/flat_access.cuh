// Float storage of any dtype, 8 consecutive elements at a time, for the flat kernels
// (elementwise.cu, activations.cu, reduce.cu, optimizer.cu): typed reads and writes in f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common.cuh"

namespace megatron::kernels::flat {

// A float tensor's device elements and dtype. Kernels branch on the dtype (the same branch in
// every thread, so nearly free) rather than being compiled once per combination of dtypes,
// which keeps nvcc time and binary size down.
struct Floats {
  void* data = nullptr;
  tensor::DType dtype = tensor::DType::F32;
};
inline Floats floats(const tensor::Tensor& x) { return {x.raw(), x.dtype()}; }

inline constexpr int kVec = 8;
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls fn with x's elements as float*, __nv_bfloat16* or __half*.
template <typename Fn>
__device__ __forceinline__ decltype(auto) typed(Floats x, Fn&& fn) {
  switch (x.dtype) {
    case tensor::DType::Bf16:
      return fn(static_cast<__nv_bfloat16*>(x.data));
    case tensor::DType::F16:
      return fn(static_cast<__half*>(x.data));
    default:
      return fn(static_cast<float*>(x.data));
  }
}

// Elements [i, i + 8) as raw storage: one or two 16-byte accesses when vec (p + i 16-byte
// aligned), else one by one.
template <typename T>
__device__ __forceinline__ void load_raw8(const T* p, int64_t i, bool vec, T (&v)[kVec]) {
  if (vec) {
    constexpr int kWords = kVec * sizeof(T) / 16;
    uint4 w[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = reinterpret_cast<const uint4*>(p + i)[k];
    memcpy(v, w, sizeof v);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = p[i + k];
  }
}
template <typename T>
__device__ __forceinline__ void store_raw8(T* p, int64_t i, bool vec, const T (&v)[kVec]) {
  if (vec) {
    constexpr int kWords = kVec * sizeof(T) / 16;
    uint4 w[kWords];
    memcpy(w, v, sizeof v);
#pragma unroll
    for (int k = 0; k < kWords; ++k) reinterpret_cast<uint4*>(p + i)[k] = w[k];
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) p[i + k] = v[k];
  }
}

// Element i, or elements [i, i + 8), as f32 values, converted as common.cuh's load and store.
__device__ __forceinline__ float read(Floats x, int64_t i) {
  return typed(x, [&](auto* p) { return load(p, i); });
}
__device__ __forceinline__ void write(Floats x, int64_t i, float v) {
  typed(x, [&](auto* p) { store(p, i, v); });
}
__device__ __forceinline__ void read8(Floats x, int64_t i, bool vec, float (&v)[kVec]) {
  typed(x, [&](auto* p) {
    std::remove_pointer_t<decltype(p)> raw[kVec];
    load_raw8(p, i, vec, raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = load(raw, k);
  });
}
__device__ __forceinline__ void write8(Floats x, int64_t i, bool vec, const float (&v)[kVec]) {
  typed(x, [&](auto* p) {
    std::remove_pointer_t<decltype(p)> raw[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) store(raw, k, v[k]);
    store_raw8(p, i, vec, raw);
  });
}

__device__ __forceinline__ int64_t thread_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace megatron::kernels::flat
