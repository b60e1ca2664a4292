// CpuBackend::attention_paged: continuous batching's attention over a paged key/value cache.
// Every row's key and value go into its sequence's block first; then each (row, head) attends
// over its own sequence's positions, one unit of work each in a fixed order: bitwise the same on
// any number of threads, and a row's result does not depend on the other rows of its step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu_attend_row.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor {

void CpuBackend::attention_paged(const Tensor& qkv, const AttentionShape& shape,
                                 const Tensor& positions, const Tensor& block_tables, float scale,
                                 Tensor& k_pool, Tensor& v_pool, Tensor& out) {
  const char* op = "attention_paged";
  cpu::require(shape.batch >= 0 && shape.seq == 1 && shape.head_dim > 0 && shape.groups > 0 &&
                   shape.heads > 0 && shape.heads % shape.groups == 0,
               op, "bad shape (one position per row; heads a positive multiple of groups)");
  const int64_t rows = shape.batch, heads = shape.heads, groups = shape.groups,
                dim = shape.head_dim, per_group = heads / groups, width = shape.qkv_width();
  cpu::require(qkv.numel() == rows * width, op, "qkv " + to_string(qkv.shape()) + " does not match the shape");
  cpu::require(out.numel() == rows * heads * dim && out.dtype() == qkv.dtype(), op,
               "out " + to_string(out.shape()) + " does not match the shape");
  cpu::require(k_pool.shape().size() == 4 && k_pool.shape() == v_pool.shape() &&
                   k_pool.dim(1) == groups && k_pool.dim(3) == dim && k_pool.dtype() == qkv.dtype() &&
                   v_pool.dtype() == qkv.dtype(),
               op, "the pools must both be [blocks, groups, block_size, head_dim] of qkv's dtype");
  cpu::require(positions.dtype() == DType::I32 && positions.numel() == rows &&
                   block_tables.dtype() == DType::I32 && block_tables.shape().size() == 2 &&
                   block_tables.dim(0) == rows,
               op, "positions must be I32 [rows] and block_tables I32 [rows, max_blocks]");
  const int64_t blocks = k_pool.dim(0), block_size = k_pool.dim(2), max_blocks = block_tables.dim(1);
  const auto* pos = static_cast<const int32_t*>(positions.raw());
  const auto* tables = static_cast<const int32_t*>(block_tables.raw());
  for (int64_t r = 0; r < rows; ++r) {
    cpu::require(pos[r] >= 0 && pos[r] < max_blocks * block_size, op, "a position is past its block table");
    for (int64_t i = 0; i <= pos[r] / block_size; ++i) {
      const int32_t block = tables[r * max_blocks + i];
      cpu::require(block >= 0 && block < blocks, op, "a block table names a block outside the pool");
    }
  }
  // Where position t of row r's sequence, group g, sits in a pool.
  const auto at = [&](int64_t r, int64_t g, int64_t t) {
    const int64_t block = tables[r * max_blocks + t / block_size];
    return ((block * groups + g) * block_size + t % block_size) * dim;
  };
  const auto query_column = [&](int64_t h) { return ((h / per_group) * (per_group + 2) + h % per_group) * dim; };
  const auto key_column = [&](int64_t g) { return (g * (per_group + 2) + per_group) * dim; };
  cpu::with_floats(qkv, [&](const auto* src) {
    cpu::with_floats(k_pool, [&](auto* k_all) {
      auto* v_all = static_cast<decltype(k_all)>(v_pool.raw());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const auto* in = src + r * width + key_column(g);
          const int64_t o = at(r, g, pos[r]);
          for (int64_t d = 0; d < dim; ++d) {
            cpu::store(k_all, o + d, cpu::load(in, d));
            cpu::store(v_all, o + d, cpu::load(in, dim + d));
          }
        }
      }
      cpu::with_floats(out, [&](auto* o_all) {
        const int64_t units = rows * heads;
        int64_t work = 0;
        for (int64_t r = 0; r < rows; ++r) work += (int64_t(pos[r]) + 1) * dim;
        const bool parallel = units > 1 && work * heads >= (int64_t{1} << 16);
#pragma omp parallel num_threads(threads_) if (parallel)
        {
          std::vector<float> q(static_cast<size_t>(dim)), o(static_cast<size_t>(dim));
          std::vector<float> s;
#pragma omp for schedule(static)
          for (int64_t unit = 0; unit < units; ++unit) {
            const int64_t r = unit / heads, h = unit % heads, g = h / per_group;
            const int64_t n = int64_t(pos[r]) + 1;
            s.resize(static_cast<size_t>(n));
            const auto* qrow = src + r * width + query_column(h);
            for (int64_t d = 0; d < dim; ++d) q[size_t(d)] = cpu::load(qrow, d);
            // Copies the accessors capture: clang's OpenMP outlining does not carry variables of
            // the enclosing function and lambdas into a lambda nested in the parallel region.
            const auto where = at;
            const auto* keys = k_all;
            const auto* values = v_all;
            cpu::attend_row(
                q, n, scale, [&](int64_t j) { return keys + where(r, g, j); },
                [&](int64_t j) { return values + where(r, g, j); }, s, o, o_all + r * heads * dim + h * dim);
          }
        }
      });
    });
  });
}

}  // namespace megatron::tensor
