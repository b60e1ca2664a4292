// The CUDA backend's reductions to a host scalar: sum, dot and sum of squares accumulated in f64
// in a fixed order (as tensor/cpu_reduce.cpp, though not the same order), and all_finite.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace megatron::kernels {
namespace {

// --- float storage of any dtype, 8 consecutive elements at a time --------------------------------
// (the same block in elementwise.cu, activations.cu, reduce.cu and optimizer.cu)

// A float tensor's device elements and dtype. Kernels branch on the dtype (the same branch in
// every thread, so nearly free) rather than being compiled once per combination of dtypes,
// which keeps nvcc time and binary size down.
struct Floats {
  void* data = nullptr;
  tensor::DType dtype = tensor::DType::F32;
};
inline Floats floats(const Tensor& x) { return {x.raw(), x.dtype()}; }

constexpr int kVec = 8;
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

// Element i, or elements [i, i + 8), as f32 values, converted as common.cuh's load.
__device__ __forceinline__ float read(Floats x, int64_t i) {
  return typed(x, [&](auto* p) { return load(p, i); });
}
__device__ __forceinline__ void read8(Floats x, int64_t i, bool vec, float (&v)[kVec]) {
  typed(x, [&](auto* p) {
    std::remove_pointer_t<decltype(p)> raw[kVec];
    load_raw8(p, i, vec, raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = load(raw, k);
  });
}

__device__ __forceinline__ int64_t thread_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() { return int64_t(gridDim.x) * blockDim.x; }

void require_float(const Tensor& x, const char* op) {
  require_device(x, op);
  require(tensor::is_floating(x.dtype()), op,
          "expected a float tensor, got " + std::string(tensor::name(x.dtype())));
}

// --- sums in f64 ---------------------------------------------------------------------------------
// Pass 1: a fixed number of blocks (a function of n alone), each thread summing its groups of
// kVec elements in order, the block's threads combined by a fixed tree of warp shuffles; pass 2:
// one block sums the blocks' partials the same way. So the result depends on n and the data
// only: never on timing, and not on the tensor's alignment either (vec changes how elements are
// loaded, not which thread adds them).

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

enum class Term { Sum, Dot, Squares };

template <Term kTerm>
__device__ __forceinline__ double term(float a, float b) {
  // Products of two f32 values are exact in f64: every term is exact, only the sum rounds.
  if constexpr (kTerm == Term::Sum) {
    return double(a);
  } else if constexpr (kTerm == Term::Dot) {
    return double(a) * double(b);
  } else {
    return double(a) * double(a);
  }
}

// The sum of v over the block, in thread 0 (blockDim.x a multiple of 32, at most 1024).
__device__ double block_sum(double v) {
  __shared__ double warp_sums[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  }
  return v;
}

// b is read only for Dot.
template <Term kTerm>
__global__ void reduce_kernel(Floats a, Floats b, int64_t n, bool vec, double* partial) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  double acc = 0.0;
  for (int64_t g = first; g < groups; g += stride) {
    float va[kVec], vb[kVec];
    read8(a, g * kVec, vec, va);
    if constexpr (kTerm == Term::Dot) read8(b, g * kVec, vec, vb);
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc += term<kTerm>(va[k], kTerm == Term::Dot ? vb[k] : 0.0f);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) acc += term<kTerm>(read(a, i), kTerm == Term::Dot ? read(b, i) : 0.0f);
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void finish_kernel(const double* partial, int64_t count, double* result) {
  double acc = 0.0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) acc += partial[k];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

template <Term kTerm>
double reduce(cudaStream_t stream, Workspace& workspace, const Tensor& a, const Tensor* b,
              const char* op) {
  require_float(a, op);
  if (b) {
    require_float(*b, op);
    require_numel(a, *b, op);
  }
  const int64_t n = a.numel();
  if (n == 0) return 0.0;
  // At least four groups per thread, at most kMaxBlocks blocks (about a full H100/H200).
  const int64_t blocks =
      std::clamp<int64_t>((n + kThreads * kVec * 4 - 1) / (kThreads * kVec * 4), 1, kMaxBlocks);
  auto* buffer =
      static_cast<double*>(workspace.get(static_cast<size_t>(blocks + 1) * sizeof(double), stream));
  const bool vec = aligned16(a.raw()) && (!b || aligned16(b->raw()));
  reduce_kernel<kTerm><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      floats(a), b ? floats(*b) : floats(a), n, vec, buffer);
  check_launch(op);
  finish_kernel<<<1, kThreads, 0, stream>>>(buffer, blocks, buffer + blocks);
  check_launch(op);
  double result = 0.0;
  check_cuda(
      cudaMemcpyAsync(&result, buffer + blocks, sizeof result, cudaMemcpyDeviceToHost, stream), op);
  check_cuda(cudaStreamSynchronize(stream), op);
  return result;
}

// --- all_finite ----------------------------------------------------------------------------------

// Sets *flag when a word's exponent bits (mask) are all ones: Inf or NaN, as the CPU tests.
template <typename Word>
__global__ void nonfinite_kernel(const Word* p, int64_t n, Word mask, bool vec, int* flag) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  unsigned hit = 0;
  for (int64_t g = first; g < groups; g += stride) {
    Word w[kVec];
    load_raw8(p, g * kVec, vec, w);
#pragma unroll
    for (int k = 0; k < kVec; ++k) hit |= (w[k] & mask) == mask;
  }
  const int64_t i = groups * kVec + first;
  if (i < n) hit |= (p[i] & mask) == mask;
  if (__syncthreads_or(int(hit)) && threadIdx.x == 0) atomicOr(flag, 1);
}

}  // namespace

double sum(cudaStream_t stream, Workspace& workspace, const Tensor& x) {
  return reduce<Term::Sum>(stream, workspace, x, nullptr, "sum");
}

double dot(cudaStream_t stream, Workspace& workspace, const Tensor& a, const Tensor& b) {
  return reduce<Term::Dot>(stream, workspace, a, &b, "dot");
}

// Squares are taken in f64, so finite values never overflow; Inf and NaN still propagate.
double sum_squares(cudaStream_t stream, Workspace& workspace, const Tensor& x) {
  return reduce<Term::Squares>(stream, workspace, x, nullptr, "sum_squares");
}

bool all_finite(cudaStream_t stream, Workspace& workspace, const Tensor& x) {
  const char* op = "all_finite";
  require_float(x, op);
  const int64_t n = x.numel();
  if (n == 0) return true;
  int* flag = static_cast<int*>(workspace.get(sizeof(int), stream));
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), stream), op);
  const bool vec = aligned16(x.raw());
  const unsigned blocks = grid_for((n + kVec - 1) / kVec, kThreads, 4096);
  switch (x.dtype()) {
    case tensor::DType::Bf16:
      nonfinite_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x.raw()), n,
                                                        uint16_t{0x7F80}, vec, flag);
      break;
    case tensor::DType::F16:
      nonfinite_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x.raw()), n,
                                                        uint16_t{0x7C00}, vec, flag);
      break;
    default:
      nonfinite_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x.raw()), n,
                                                        0x7F800000u, vec, flag);
      break;
  }
  check_launch(op);
  int found = 0;
  check_cuda(cudaMemcpyAsync(&found, flag, sizeof found, cudaMemcpyDeviceToHost, stream), op);
  check_cuda(cudaStreamSynchronize(stream), op);
  return found == 0;
}

}  // namespace megatron::kernels
