// Internal to the CPU backend: f32 staging for loops over float tensors of any storage dtype, and
// the fixed row blocking that keeps sums over rows independent of the thread count.
//
// A kernel asks for a run of elements as f32 and gets the tensor's own memory when it is f32,
// else a conversion into a small buffer, so every loop body is plain f32 and vectorises, and
// each op is compiled once rather than once per combination of dtypes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor::cpu {

// Elements per unit of elementwise work: three staging buffers of it fit in L1.
inline constexpr int64_t kChunk = 2048;
// Below this many elements a loop runs on the calling thread: waking the team costs more.
inline constexpr int64_t kParallelMin = 32768;

// A float tensor's storage, resolved (and checked) before a parallel region, inside which
// nothing may throw.
struct Floats {
  std::byte* data = nullptr;
  DType dtype = DType::F32;
};

inline Floats floats(const Tensor& x, const char* op) {
  require(x.device() == Device::Cpu, op, "tensor is not on the CPU");
  require(is_floating(x.dtype()), op,
          "expected a float tensor, got " + std::string(name(x.dtype())));
  return {static_cast<std::byte*>(x.raw()), x.dtype()};
}

// Elements [begin, begin + n) of x as f32: x's own memory when it is f32, else converted into
// buf (which must hold n floats).
inline const float* load_f32(Floats x, int64_t begin, int64_t n, float* buf) {
  const auto count = static_cast<size_t>(n);
  switch (x.dtype) {
    case DType::Bf16:
      convert(std::span<const bf16>(reinterpret_cast<const bf16*>(x.data) + begin, count),
              std::span<float>(buf, count));
      return buf;
    case DType::F16:
      convert(std::span<const f16>(reinterpret_cast<const f16*>(x.data) + begin, count),
              std::span<float>(buf, count));
      return buf;
    default:
      return reinterpret_cast<const float*>(x.data) + begin;
  }
}

// Where to compute elements [begin, ...) of y in f32: y itself when it is f32, else buf; pass
// the result to store_f32 afterwards.
inline float* f32_target(Floats y, int64_t begin, float* buf) {
  return y.dtype == DType::F32 ? reinterpret_cast<float*>(y.data) + begin : buf;
}

// Writes n f32 values to elements [begin, begin + n) of y, rounding to its dtype.
inline void store_f32(Floats y, int64_t begin, int64_t n, const float* values) {
  const auto count = static_cast<size_t>(n);
  switch (y.dtype) {
    case DType::Bf16:
      convert(std::span<const float>(values, count),
              std::span<bf16>(reinterpret_cast<bf16*>(y.data) + begin, count));
      return;
    case DType::F16:
      convert(std::span<const float>(values, count),
              std::span<f16>(reinterpret_cast<f16*>(y.data) + begin, count));
      return;
    default: {
      float* out = reinterpret_cast<float*>(y.data) + begin;
      if (out != values) std::memmove(out, values, count * sizeof(float));
    }
  }
}

// Calls body(begin, length) for consecutive runs of at most kChunk of n elements, in parallel;
// runs start at multiples of kChunk.
template <typename Body>
void for_chunks(int64_t n, Body&& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    body(begin, std::min(kChunk, n - begin));
  }
}

// How sums over the rows of an [n, c] tensor are split: `count` blocks of `rows` consecutive
// rows (the last may be short), each summed in row order, the blocks' partial sums then added
// in block order. A function of n alone, so the result never depends on the thread count; at
// least 8 rows a block (the partials stay small beside the input) and at most 256 blocks.
struct RowBlocks {
  int64_t count = 0;
  int64_t rows = 0;
};

inline RowBlocks row_blocks(int64_t n) {
  if (n <= 0) return {};
  const int64_t wanted = std::min<int64_t>((n + 7) / 8, 256);
  const int64_t rows = (n + wanted - 1) / wanted;
  return {(n + rows - 1) / rows, rows};
}

// out[j] += sum over b of partial[b * c + j], added in block order.
inline void add_partials(const float* partial, int64_t blocks, int64_t c, float* out) {
  const int64_t chunks = (c + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (blocks * c >= kParallelMin)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(c, begin + kChunk);
    float total[kChunk];
    std::copy(partial + begin, partial + end, total);
    for (int64_t b = 1; b < blocks; ++b) {
      const float* p = partial + b * c;
      for (int64_t j = begin; j < end; ++j) total[j - begin] += p[j];
    }
    for (int64_t j = begin; j < end; ++j) out[j] += total[j - begin];
  }
}

// A scratch buffer of the calling thread, reused across calls so that steady-state training
// does not page-fault fresh memory on every op. Contents are unspecified.
inline float* thread_scratch(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace megatron::tensor::cpu
