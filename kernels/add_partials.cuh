// The second pass of the norm kernels' parameter gradients (norm.cu, qk_norm.cu): each block's
// partial sums added across blocks in block order, so the totals depend on the shapes alone.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace megatron::kernels {
namespace {

// out[j] += the sum over blocks b, in block order, of partial[b * width + j]: j < c into
// first[j], c <= j < width into second[j - c] (dgamma and dbeta, or the q and k norms' dgamma).
__global__ void add_partials_kernel(const float* partial, int64_t blocks, int64_t width,
                                    int64_t c, float* first, float* second) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < width; j += stride) {
    float total = partial[j];
#pragma unroll 8
    for (int64_t b = 1; b < blocks; ++b) total += partial[b * width + j];
    if (j < c) {
      first[j] += total;
    } else {
      second[j - c] += total;
    }
  }
}

}  // namespace
}  // namespace megatron::kernels
