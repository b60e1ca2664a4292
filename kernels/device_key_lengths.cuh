// The padding mask's key lengths (AttentionOptions::key_lengths) copied to the device for one
// call's launches: shared by the flash and the cross-attention kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/common.cuh"

namespace megatron::kernels {

// Freed in stream order after the call's launches (the stream-ordered pool makes both cheap).
// get() is null when there are no lengths (every key attended to).
class DeviceKeyLengths {
 public:
  DeviceKeyLengths(cudaStream_t stream, const std::vector<int64_t>& lengths, const char* op)
      : stream_(stream) {
    if (lengths.empty()) return;
    const std::vector<int> host(lengths.begin(), lengths.end());  // the caller checked each fits
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, host.size() * sizeof(int), stream), op);
    data_ = static_cast<int*>(p);
    // From pageable memory the copy is staged before the call returns: `host` may go.
    check_cuda(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(int),
                               cudaMemcpyHostToDevice, stream),
               op);
  }
  ~DeviceKeyLengths() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  DeviceKeyLengths(const DeviceKeyLengths&) = delete;
  DeviceKeyLengths& operator=(const DeviceKeyLengths&) = delete;
  const int* get() const { return data_; }

 private:
  cudaStream_t stream_;
  int* data_ = nullptr;
};

}  // namespace megatron::kernels
