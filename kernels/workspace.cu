// Workspace: the growing scratch buffer each stream's ops take their temporary device memory
// from (partial sums of reductions and of column sums, flags).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace megatron::kernels {
namespace {

constexpr size_t kAlignment = 256;

// Throws naming the workspace when status is a failure, first clearing CUDA's last-error slot so
// that a failed allocation is not reported again by the next op's launch check.
void check(cudaError_t status) {
  if (status != cudaSuccess) cudaGetLastError();
  check_cuda(status, "workspace");
}

}  // namespace

Workspace::~Workspace() {
  // A destructor must not throw: a failure here (a context already torn down at exit) is
  // ignored, and cleared so that it does not surface in an unrelated check later.
  if (data_ && cudaFree(data_) != cudaSuccess) cudaGetLastError();
}

void* Workspace::get(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_) return data_;
  // Grow at least geometrically so that a sequence of slowly growing requests reallocates
  // O(log) times; whole 256-byte units so that any sub-buffer can be aligned within.
  size_t want = std::max(bytes, 2 * bytes_);
  want = (want + kAlignment - 1) / kAlignment * kAlignment;
  if (data_) {
    // Work already enqueued on `stream` may still be reading the old buffer.
    check(cudaStreamSynchronize(stream));
    void* old = data_;
    data_ = nullptr;
    bytes_ = 0;
    check(cudaFree(old));
  }
  void* fresh = nullptr;
  check(cudaMalloc(&fresh, want));
  data_ = fresh;
  bytes_ = want;
  return data_;
}

}  // namespace megatron::kernels
