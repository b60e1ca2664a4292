// A block-wide reduction (max or sum) of one float per thread for the attention kernels that
// give a whole block to one query row: warp shuffles, then the warps' results in warp order.
#pragma once

#include <cuda_runtime.h>

namespace megatron::kernels {

// Every thread of a kThreads-thread block calls it and gets the block's max (kMax) or sum. The
// order of operations is fixed by the thread layout alone, so the result is the same bit for bit
// on every run. `scratch` holds kThreads / 32 floats; back-to-back calls may share it.
template <int kThreads, bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  static_assert(kThreads % 32 == 0, "whole warps");
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = kMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

}  // namespace megatron::kernels
