// The CUDA backend's generation attention (CudaBackend::attention_cached): the new tokens' keys
// and values into the cache, and the attention of queries after a prefill over the cached keys,
// matching CpuBackend::attention_cached (tensor/cpu_cached_attention.cpp). A prefill runs the
// flash kernel instead (the backend calls attention_forward).
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
  int64_t batch, seq, heads, groups, dim, per_group, width, capacity;
  __host__ __device__ int64_t query_column(int64_t head) const {
    return ((head / per_group) * (per_group + 2) + head % per_group) * dim;
  }
  __host__ __device__ int64_t key_column(int64_t group) const {
    return (group * (per_group + 2) + per_group) * dim;
  }
  __host__ __device__ int64_t cache_row(int64_t b, int64_t g, int64_t t) const {
    return ((b * groups + g) * capacity + t) * dim;
  }
};

template <typename T>
__global__ void append_kernel(const T* qkv, Geometry l, int64_t start, T* k_cache, T* v_cache) {
  const int64_t n = l.batch * l.seq * l.groups * l.dim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % l.dim, g = (i / l.dim) % l.groups, row = i / (l.dim * l.groups);
    const int64_t b = row / l.seq, t = row % l.seq;
    const T* in = qkv + row * l.width + l.key_column(g) + d;
    const int64_t at = l.cache_row(b, g, start + t) + d;
    k_cache[at] = in[0];
    v_cache[at] = in[l.dim];
  }
}

// Block (b * heads + h, t): query t of head h of sequence b over keys 0..start + t; its scores in
// shared memory.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const T* qkv, Geometry l, int64_t start, float scale, const T* k_cache,
                  const T* v_cache, T* out) {
  extern __shared__ float shared[];
  float* q = shared;
  float* s = shared + l.dim;
  __shared__ float scratch[kThreads / 32];
  const int64_t b = blockIdx.x / l.heads, h = blockIdx.x % l.heads, t = blockIdx.y;
  const int64_t g = h / l.per_group;
  const int64_t n = start + t + 1;
  const T* qrow = qkv + (b * l.seq + t) * l.width + l.query_column(h);
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) q[d] = load(qrow, d);
  __syncthreads();
  const T* kc = k_cache + l.cache_row(b, g, 0);
  const T* vc = v_cache + l.cache_row(b, g, 0);
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    float dot = 0.0f;
    for (int64_t d = 0; d < l.dim; ++d) dot += q[d] * load(kc + j * l.dim, d);
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
  T* orow = out + (b * l.seq + t) * l.heads * l.dim + h * l.dim;
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) acc += s[j] * load(vc + j * l.dim, d);
    store(orow, d, acc / sum);
  }
}

}  // namespace

void attention_cache_append(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                            int64_t start, Tensor& k_cache, Tensor& v_cache) {
  const char* op = "attention_cached";
  require(shape.batch >= 0 && shape.seq >= 0 && shape.head_dim > 0 && shape.groups > 0 &&
              shape.heads > 0 && shape.heads % shape.groups == 0,
          op, "bad shape (heads must be a positive multiple of groups)");
  require_device(qkv, op);
  require_device(k_cache, op);
  require_device(v_cache, op);
  require(k_cache.shape().size() == 4, op, "the caches must be [batch, groups, capacity, head_dim]");
  const Geometry l{shape.batch, shape.seq, shape.heads, shape.groups, shape.head_dim,
                   shape.heads / shape.groups, shape.qkv_width(), k_cache.dim(2)};
  const tensor::Shape cache_shape{l.batch, l.groups, l.capacity, l.dim};
  require(k_cache.shape() == cache_shape && v_cache.shape() == cache_shape &&
              k_cache.dtype() == qkv.dtype() && v_cache.dtype() == qkv.dtype(),
          op, "the caches must both be [batch, groups, capacity, head_dim] of qkv's dtype");
  require(qkv.numel() == l.batch * l.seq * l.width, op,
          "qkv " + tensor::to_string(qkv.shape()) + " does not match the shape");
  require(start >= 0 && start + l.seq <= l.capacity, op, "the new positions do not fit the cache");
  const int64_t n = l.batch * l.seq * l.groups * l.dim;
  if (n == 0) return;
  with_floats(qkv, [&](auto* p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    append_kernel<T><<<grid_for(n), 256, 0, stream>>>(p, l, start, static_cast<T*>(k_cache.raw()),
                                                        static_cast<T*>(v_cache.raw()));
  });
  check_launch(op);
}

void attention_decode(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                      int64_t start, float scale, const Tensor& k_cache, const Tensor& v_cache,
                      Tensor& out) {
  const char* op = "attention_cached";
  require_device(out, op);
  require(out.dtype() == qkv.dtype(), op, "out must have qkv's dtype");
  require(out.numel() == shape.batch * shape.seq * shape.heads * shape.head_dim, op,
          "out " + tensor::to_string(out.shape()) + " does not match the shape");
  const Geometry l{shape.batch, shape.seq, shape.heads, shape.groups, shape.head_dim,
                   shape.heads / shape.groups, shape.qkv_width(), k_cache.dim(2)};
  if (l.batch * l.seq == 0) return;
  const size_t shared = size_t(l.dim + start + l.seq) * sizeof(float);
  int device = 0, limit = 0;
  check_cuda(cudaGetDevice(&device), op);
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  require(shared + 1024 <= size_t(limit), op,
          "the cache holds more positions than one block's shared memory can score");
  require(l.batch * l.heads <= INT_MAX && l.seq <= 65535, op, "too many queries for one launch");
  with_floats(qkv, [&](auto* p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    if (shared > 48 * 1024) {
      check_cuda(cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(shared)),
                 op);
    }
    const dim3 grid(unsigned(l.batch * l.heads), unsigned(l.seq));
    decode_kernel<T><<<grid, kThreads, shared, stream>>>(
        p, l, start, scale, static_cast<const T*>(k_cache.raw()),
        static_cast<const T*>(v_cache.raw()), static_cast<T*>(out.raw()));
  });
  check_launch(op);
}

}  // namespace megatron::kernels
