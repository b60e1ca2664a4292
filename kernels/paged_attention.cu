// The CUDA backend's continuous-batching attention (CudaBackend::attention_paged): each row's key
// and value into its sequence's pool block, then one block per (row, head) over that sequence's
// positions, matching CpuBackend::attention_paged (tensor/cpu_paged_attention.cpp).
#include <algorithm>
#include <climits>
#include <type_traits>

#include "kernels/block_reduce.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace megatron::kernels {
namespace {

constexpr int kThreads = 128;

struct Geometry {
  int64_t rows, heads, groups, dim, per_group, width, block_size, max_blocks;
  __host__ __device__ int64_t query_column(int64_t head) const {
    return ((head / per_group) * (per_group + 2) + head % per_group) * dim;
  }
  __host__ __device__ int64_t key_column(int64_t group) const {
    return (group * (per_group + 2) + per_group) * dim;
  }
  // Where position t of row r's sequence, group g, sits in a pool.
  __device__ int64_t at(const int32_t* tables, int64_t r, int64_t g, int64_t t) const {
    const int64_t block = tables[r * max_blocks + t / block_size];
    return ((block * groups + g) * block_size + t % block_size) * dim;
  }
};

template <typename T>
__global__ void paged_append_kernel(const T* qkv, Geometry l, const int32_t* positions,
                                    const int32_t* tables, T* k_pool, T* v_pool) {
  const int64_t n = l.rows * l.groups * l.dim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % l.dim, g = (i / l.dim) % l.groups, r = i / (l.dim * l.groups);
    const T* in = qkv + r * l.width + l.key_column(g) + d;
    const int64_t at = l.at(tables, r, g, positions[r]) + d;
    k_pool[at] = in[0];
    v_pool[at] = in[l.dim];
  }
}

// Block (r * heads + h): row r's query of head h over its sequence's positions 0..positions[r];
// its scores in shared memory.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    paged_kernel(const T* qkv, Geometry l, const int32_t* positions, const int32_t* tables,
                 float scale, const T* k_pool, const T* v_pool, T* out) {
  extern __shared__ float shared[];
  float* q = shared;
  float* s = shared + l.dim;
  __shared__ float scratch[kThreads / 32];
  const int64_t r = blockIdx.x / l.heads, h = blockIdx.x % l.heads;
  const int64_t g = h / l.per_group;
  const int64_t n = int64_t(positions[r]) + 1;
  const T* qrow = qkv + r * l.width + l.query_column(h);
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) q[d] = load(qrow, d);
  __syncthreads();
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const T* k = k_pool + l.at(tables, r, g, j);
    float dot = 0.0f;
    for (int64_t d = 0; d < l.dim; ++d) dot += q[d] * load(k, d);
    s[j] = dot * scale;
    max = fmaxf(max, s[j]);
  }
  max = block_reduce<kThreads, true>(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    s[j] = expf(s[j] - max);
    sum += s[j];
  }
  sum = block_reduce<kThreads, false>(sum, scratch);
  __syncthreads();
  T* orow = out + r * l.heads * l.dim + h * l.dim;
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) acc += s[j] * load(v_pool + l.at(tables, r, g, j), d);
    store(orow, d, acc / sum);
  }
}

}  // namespace

void attention_paged(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                     const Tensor& positions, const Tensor& block_tables, float scale,
                     Tensor& k_pool, Tensor& v_pool, Tensor& out) {
  const char* op = "attention_paged";
  require(shape.batch >= 0 && shape.seq == 1 && shape.head_dim > 0 && shape.groups > 0 &&
              shape.heads > 0 && shape.heads % shape.groups == 0,
          op, "bad shape (one position per row; heads a positive multiple of groups)");
  require_device(qkv, op);
  require_device(positions, op);
  require_device(block_tables, op);
  require_device(out, op);
  require_device(k_pool, op);
  require_device(v_pool, op);
  require(k_pool.shape().size() == 4 && k_pool.shape() == v_pool.shape() &&
              k_pool.dim(1) == shape.groups && k_pool.dim(3) == shape.head_dim &&
              k_pool.dtype() == qkv.dtype() && v_pool.dtype() == qkv.dtype(),
          op, "the pools must both be [blocks, groups, block_size, head_dim] of qkv's dtype");
  require(positions.dtype() == tensor::DType::I32 && positions.numel() == shape.batch &&
              block_tables.dtype() == tensor::DType::I32 && block_tables.shape().size() == 2 &&
              block_tables.dim(0) == shape.batch,
          op, "positions must be I32 [rows] and block_tables I32 [rows, max_blocks]");
  const Geometry l{shape.batch, shape.heads, shape.groups, shape.head_dim,
                   shape.heads / shape.groups, shape.qkv_width(), k_pool.dim(2), block_tables.dim(1)};
  require(qkv.numel() == l.rows * l.width, op, "qkv " + tensor::to_string(qkv.shape()) + " does not match the shape");
  require(out.dtype() == qkv.dtype() && out.numel() == l.rows * l.heads * l.dim, op,
          "out " + tensor::to_string(out.shape()) + " does not match the shape");
  if (l.rows == 0) return;
  // Scores for the longest sequence a block table can hold.
  const size_t shared = size_t(l.dim + l.max_blocks * l.block_size) * sizeof(float);
  int device = 0, limit = 0;
  check_cuda(cudaGetDevice(&device), op);
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  require(shared + 1024 <= size_t(limit), op,
          "a block table holds more positions than one block's shared memory can score");
  require(l.rows * l.heads <= INT_MAX, op, "too many rows for one launch");
  const auto* pos = static_cast<const int32_t*>(positions.raw());
  const auto* tables = static_cast<const int32_t*>(block_tables.raw());
  with_floats(qkv, [&](auto* p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    const int64_t n = l.rows * l.groups * l.dim;
    paged_append_kernel<T><<<grid_for(n), 256, 0, stream>>>(p, l, pos, tables, static_cast<T*>(k_pool.raw()),
                                                            static_cast<T*>(v_pool.raw()));
    if (shared > 48 * 1024) {
      check_cuda(cudaFuncSetAttribute(paged_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(shared)),
                 op);
    }
    paged_kernel<T><<<unsigned(l.rows * l.heads), kThreads, shared, stream>>>(
        p, l, pos, tables, scale, static_cast<const T*>(k_pool.raw()),
        static_cast<const T*>(v_pool.raw()), static_cast<T*>(out.raw()));
  });
  check_launch(op);
}

}  // namespace megatron::kernels
