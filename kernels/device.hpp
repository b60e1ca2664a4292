// GPU discovery and a first elementwise kernel, callable from plain C++ without CUDA headers.
// Everything here reports "no GPU" instead of failing when no driver or device is present.
#pragma once

#include <cstddef>
#include <string>

namespace megatron::kernels {

// Number of usable CUDA devices; 0 when there is no driver or no device.
int device_count();

// Makes device `index` current for this thread (cudaSetDevice); nothing when it does not exist.
void select_device(int index);

// "NVIDIA H200, sm_90, 139.8 GiB" for device `index`; empty when it does not exist.
std::string device_description(int index);

// y[i] = alpha * x[i] + y[i] on device 0, through host buffers (copies in and out).
// Used by the toolchain test; returns false when no device is present.
bool axpy_on_device(float alpha, const float* x, float* y, std::size_t n);

}  // namespace megatron::kernels
