// The CUDA backend's reductions to a host scalar: sum, dot and sum of squares accumulated in f64
// in a fixed order (as tensor/cpu_reduce.cpp, though not the same order), and all_finite.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common.cuh"
#include "kernels/flat_access.cuh"
#include "kernels/ops.hpp"

namespace megatron::kernels {
namespace {

// Float storage of any dtype, 8 consecutive elements at a time: kernels/flat_access.cuh.
using namespace flat;

// --- sums in f64 ---------------------------------------------------------------------------------
// Pass 1: a fixed number of blocks (a function of n alone), each thread summing its groups of
// kVec elements in order, the block's threads combined by a fixed tree of warp shuffles; pass 2:
// one block sums the blocks' partials the same way. So the result depends on n and the data
// only: never on timing, and not on the tensor's alignment either (vec changes how elements are
// loaded, not which thread adds them).

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
