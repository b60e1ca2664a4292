// CpuBackend: construction, thread setup and memory (allocation, fill, copy, host transfer).
#include "tensor/cpu_backend.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor {

struct CpuBackend::Pool {
  std::mutex mutex;
  int64_t allocated = 0;  // live tensor bytes (as requested)
  int64_t peak = 0;
  int64_t cached = 0;     // bytes of free buffers kept for reuse
  std::unordered_map<size_t, std::vector<std::byte*>> free;  // by rounded size

  std::byte* take(size_t rounded, int64_t bytes) {
    std::lock_guard lock(mutex);
    allocated += bytes;
    peak = std::max(peak, allocated);
    auto it = free.find(rounded);
    if (it == free.end() || it->second.empty()) return nullptr;
    std::byte* p = it->second.back();
    it->second.pop_back();
    cached -= int64_t(rounded);
    return p;
  }
  void give_back(std::byte* p, size_t rounded, int64_t bytes) {
    std::lock_guard lock(mutex);
    allocated -= bytes;
    free[rounded].push_back(p);
    cached += int64_t(rounded);
  }
  void untrack(int64_t bytes) {
    std::lock_guard lock(mutex);
    allocated -= bytes;
  }
  void release() {
    std::lock_guard lock(mutex);
    for (auto& [size, blocks] : free) {
      for (std::byte* p : blocks) std::free(p);
    }
    free.clear();
    cached = 0;
  }
  ~Pool() { release(); }
};

CpuBackend::CpuBackend(int threads) : pool_(std::make_shared<Pool>()) {
  if (threads <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    threads = env ? std::atoi(env) : 0;
    if (threads <= 0) threads = omp_get_num_procs();
  }
  threads_ = threads;
  omp_set_num_threads(threads_);
  openblas_set_num_threads(threads_);
}

CpuBackend::~CpuBackend() = default;

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
  std::byte* memory = pool_->take(rounded, bytes);
  if (!memory) memory = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (!memory) {
    pool_->untrack(bytes);
    throw std::bad_alloc();
  }
  std::shared_ptr<std::byte> buffer(memory, [pool = pool_, rounded, bytes](std::byte* p) {
    pool->give_back(p, rounded, bytes);
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
  std::lock_guard lock(pool_->mutex);
  return {.allocated_bytes = pool_->allocated, .peak_bytes = pool_->peak};
}

void CpuBackend::reset_peak_memory() {
  std::lock_guard lock(pool_->mutex);
  pool_->peak = pool_->allocated;
}

void CpuBackend::release_cached_memory() { pool_->release(); }

int64_t CpuBackend::cached_bytes() const {
  std::lock_guard lock(pool_->mutex);
  return pool_->cached;
}

}  // namespace megatron::tensor
