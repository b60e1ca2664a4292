// Float storage of any dtype, 8 consecutive elements at a time, for the flat kernels
// (elementwise.cu, activations.cu, reduce.cu, optimizer.cu): typed reads and writes in f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
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


// Threads per block of the element-wise kernels.
inline constexpr unsigned kThreads = 256;

inline void require_float(const tensor::Tensor& x, const char* op) {
  require_device(x, op);
  require(tensor::is_floating(x.dtype()), op,
          "expected a float tensor, got " + std::string(tensor::name(x.dtype())));
}

// Blocks for n elements taken kVec at a time.
inline unsigned grid_for_vec(int64_t n) { return grid_for((n + kVec - 1) / kVec, kThreads); }

// --- maps ----------------------------------------------------------------------------------------
// Each thread takes groups of kVec consecutive elements (grid-stride), the first threads the
// n % kVec left over. Outputs may alias inputs: every element is read before it is written, by
// the same thread.

template <typename F>
__global__ void map1_kernel(Floats x, Floats y, int64_t n, bool vec, F f) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    float v[kVec];
    read8(x, g * kVec, vec, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = f(v[k]);
    write8(y, g * kVec, vec, v);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) write(y, i, f(read(x, i)));
}

template <typename F>
__global__ void map2_kernel(Floats a, Floats b, Floats out, int64_t n, bool vec, F f) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    float va[kVec], vb[kVec];
    read8(a, g * kVec, vec, va);
    read8(b, g * kVec, vec, vb);
#pragma unroll
    for (int k = 0; k < kVec; ++k) va[k] = f(va[k], vb[k]);
    write8(out, g * kVec, vec, va);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) write(out, i, f(read(a, i), read(b, i)));
}

// Launches map1_kernel (y = f(x)) or map2_kernel (out = f(a, b)) over whole tensors, after
// checking them; 16-byte accesses when every tensor is aligned for them.
template <typename F>
void map1(cudaStream_t stream, const tensor::Tensor& x, tensor::Tensor& y, const char* op, F f) {
  require_float(x, op);
  require_float(y, op);
  require_numel(x, y, op);
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool vec = aligned16(x.raw()) && aligned16(y.raw());
  map1_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(floats(x), floats(y), n, vec, f);
  check_launch(op);
}

template <typename F>
void map2(cudaStream_t stream, const tensor::Tensor& a, const tensor::Tensor& b,
          tensor::Tensor& out, const char* op, F f) {
  require_float(a, op);
  require_float(b, op);
  require_float(out, op);
  require_numel(a, b, op);
  require_numel(a, out, op);
  const int64_t n = a.numel();
  if (n == 0) return;
  const bool vec = aligned16(a.raw()) && aligned16(b.raw()) && aligned16(out.raw());
  map2_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(floats(a), floats(b), floats(out), n, vec,
                                                        f);
  check_launch(op);
}

}  // namespace megatron::kernels::flat
