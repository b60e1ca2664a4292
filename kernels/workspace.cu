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
  if (data_ && cudaFreeAsync(data_, stream_) != cudaSuccess) cudaGetLastError();
}

// Stream-ordered, from the device's memory pool (the one CudaBackend's tensors come from): the
// old buffer returns to the pool once the work already enqueued on `stream` is done with it, so
// growing neither synchronises (which would also wait for NCCL's kernels on other streams) nor
// fails while the pool holds enough free memory.
void* Workspace::get(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_) return data_;
  // Grow at least geometrically so that a sequence of slowly growing requests reallocates
  // O(log) times; whole 256-byte units so that any sub-buffer can be aligned within.
  size_t want = std::max(bytes, 2 * bytes_);
  want = (want + kAlignment - 1) / kAlignment * kAlignment;
  if (data_) {
    void* old = data_;
    data_ = nullptr;
    bytes_ = 0;
    check(cudaFreeAsync(old, stream_));
  }
  void* fresh = nullptr;
  check(cudaMallocAsync(&fresh, want, stream));
  data_ = fresh;
  bytes_ = want;
  stream_ = stream;
  return data_;
}

}  // namespace megatron::kernels
