#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/device.hpp"

namespace megatron::kernels {
namespace {

__global__ void axpy_kernel(float alpha, const float* __restrict__ x, float* __restrict__ y,
                            std::size_t n) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

bool ok(cudaError_t status) { return status == cudaSuccess; }

}  // namespace

int device_count() {
  int count = 0;
  if (!ok(cudaGetDeviceCount(&count))) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

void select_device(int index) {
  if (index >= 0 && index < device_count() && !ok(cudaSetDevice(index))) cudaGetLastError();
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  if (index < 0 || index >= device_count() || !ok(cudaGetDeviceProperties(&prop, index))) return {};
  char text[320];
  std::snprintf(text, sizeof text, "%s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

bool axpy_on_device(float alpha, const float* x, float* y, std::size_t n) {
  if (device_count() == 0) return false;
  float* dx = nullptr;
  float* dy = nullptr;
  const std::size_t bytes = n * sizeof(float);
  bool good = ok(cudaMalloc(&dx, bytes)) && ok(cudaMalloc(&dy, bytes)) &&
              ok(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice)) &&
              ok(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
  if (good) {
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
    axpy_kernel<<<blocks, threads>>>(alpha, dx, dy, n);
    good = ok(cudaGetLastError()) && ok(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost));
  }
  cudaFree(dx);
  cudaFree(dy);
  return good;
}

}  // namespace megatron::kernels
