// CpuBackend: construction, thread setup and memory (allocation, fill, copy, host transfer).
#include "tensor/cpu_backend.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor {

CpuBackend::CpuBackend(int threads) {
  if (threads <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    threads = env ? std::atoi(env) : 0;
    if (threads <= 0) threads = omp_get_num_procs();
  }
  threads_ = threads;
  omp_set_num_threads(threads_);
  openblas_set_num_threads(threads_);
}

std::string CpuBackend::description() const {
  // openblas_get_config() reads like "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64".
  std::string config = openblas_get_config();
  const auto version_end = config.find(' ', config.find(' ') + 1);
  return "cpu (" + config.substr(0, version_end) + ", " + std::to_string(threads_) +
         (threads_ == 1 ? " thread)" : " threads)");
}

Tensor CpuBackend::empty(const Shape& shape, DType dtype) {
  const int64_t bytes = tensor::numel(shape) * static_cast<int64_t>(size_of(dtype));
  // 64-byte alignment: whole cache lines and aligned AVX-512 loads.
  const size_t rounded = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (!memory) throw std::bad_alloc();
  const int64_t now = counters_->allocated.fetch_add(bytes) + bytes;
  int64_t peak = counters_->peak.load();
  while (now > peak && !counters_->peak.compare_exchange_weak(peak, now)) {
  }
  std::shared_ptr<std::byte> buffer(memory, [counters = counters_, bytes](std::byte* p) {
    counters->allocated.fetch_sub(bytes);
    std::free(p);
  });
  return Tensor(std::move(buffer), 0, shape, dtype, Device::Cpu);
}

void CpuBackend::fill(Tensor& x, double value) {
  const int64_t n = x.numel();
  if (value == 0.0) {
    std::memset(x.raw(), 0, x.bytes());
    return;
  }
  switch (x.dtype()) {
    case DType::I32: std::fill_n(x.data<int32_t>(), n, static_cast<int32_t>(value)); return;
    case DType::I64: std::fill_n(x.data<int64_t>(), n, static_cast<int64_t>(value)); return;
    default: break;
  }
  cpu::with_floats(x, [&](auto* p) {
    const float v = static_cast<float>(value);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) cpu::store(p, i, v);
  });
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  cpu::require_numel(src, dst, "copy");
  if (src.dtype() == dst.dtype()) {
    if (src.raw() != dst.raw()) std::memmove(dst.raw(), src.raw(), src.bytes());
    return;
  }
  if (!is_floating(src.dtype()) || !is_floating(dst.dtype())) {
    cpu::fail("copy", std::string(name(src.dtype())) + " to " + std::string(name(dst.dtype())));
  }
  const int64_t n = src.numel();
  cpu::with_floats(src, [&](const auto* in) {
    cpu::with_floats(dst, [&](auto* out) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) cpu::store(out, i, cpu::load(in, i));
    });
  });
}

// Empty tensors may come with null host pointers, which memcpy must never see.
void CpuBackend::read(const Tensor& x, void* host) {
  if (x.bytes()) std::memcpy(host, x.raw(), x.bytes());
}

void CpuBackend::write(Tensor& x, const void* host) {
  if (x.bytes()) std::memcpy(x.raw(), host, x.bytes());
}

MemoryStats CpuBackend::memory() const {
  return {.allocated_bytes = counters_->allocated.load(), .peak_bytes = counters_->peak.load()};
}

void CpuBackend::reset_peak_memory() { counters_->peak.store(counters_->allocated.load()); }

}  // namespace megatron::tensor
