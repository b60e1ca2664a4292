// CpuBackend embeddings: a row gather forward and a scatter-add backward, with ids outside the
// table's rows (another vocab-parallel shard's) contributing nothing.
#include <algorithm>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor {
namespace {

// The backward splits the hidden dimension into blocks of this many columns, one thread per
// block, each visiting tokens in order: repeated ids add up in the same order on any number of
// threads, and no two threads touch the same element.
constexpr int64_t kColumnBlock = 64;

// Below this many elements a loop runs on the calling thread: waking the team costs more.
constexpr int64_t kParallelElements = 32768;

void check_ids(const Tensor& ids, const char* op) {
  cpu::require(ids.dtype() == DType::I32, op, "ids must be i32");
}

}  // namespace

void CpuBackend::embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out,
                                   int64_t row_offset, bool accumulate) {
  const char* op = "embedding_forward";
  check_ids(ids, op);
  cpu::require(table.rank() >= 1, op, "table must have rows");
  const int64_t rows = table.dim(0), hidden = table.row_size(), n = ids.numel();
  cpu::require(out.numel() == n * hidden, op,
               "out " + to_string(out.shape()) + " is not [ids, " + std::to_string(hidden) + "]");
  const int32_t* id = ids.data<int32_t>();
  const bool parallel = n * hidden >= kParallelElements;
  cpu::with_floats(table, [&](const auto* in) {
    cpu::with_floats(out, [&](auto* o) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = int64_t{id[i]} - row_offset;
        auto* dst = o + i * hidden;
        if (row < 0 || row >= rows) {
          if (!accumulate) {
            for (int64_t c = 0; c < hidden; ++c) cpu::store(dst, c, 0.0f);
          }
          continue;
        }
        const auto* src = in + row * hidden;
        for (int64_t c = 0; c < hidden; ++c) {
          const float base = accumulate ? cpu::load(dst, c) : 0.0f;
          cpu::store(dst, c, base + cpu::load(src, c));
        }
      }
    });
  });
}

void CpuBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable,
                                    int64_t row_offset) {
  const char* op = "embedding_backward";
  check_ids(ids, op);
  cpu::require(dtable.dtype() == DType::F32 && dtable.rank() >= 1, op,
               "dtable must be f32 with rows");
  const int64_t rows = dtable.dim(0), hidden = dtable.row_size(), n = ids.numel();
  cpu::require(dout.numel() == n * hidden, op,
               "dout " + to_string(dout.shape()) + " is not [ids, " + std::to_string(hidden) + "]");
  const int32_t* id = ids.data<int32_t>();
  float* table = dtable.data<float>();
  const int64_t blocks = (hidden + kColumnBlock - 1) / kColumnBlock;
  const bool parallel = n * hidden >= kParallelElements;
  cpu::with_floats(dout, [&](const auto* g) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t c0 = block * kColumnBlock, c1 = std::min(hidden, c0 + kColumnBlock);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = int64_t{id[i]} - row_offset;
        if (row < 0 || row >= rows) continue;
        float* dst = table + row * hidden;
        const auto* src = g + i * hidden;
        for (int64_t c = c0; c < c1; ++c) dst[c] += cpu::load(src, c);
      }
    }
  });
}

}  // namespace megatron::tensor
