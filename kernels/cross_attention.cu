// The CUDA backend's materialised attention (CudaBackend::cross_attention_forward and _backward):
// T5's decoder queries over the encoder's keys and values, or (CrossAttentionShape::packed)
// self-attention over fused QKV rows, causal or not, with an optional additive score bias (T5's
// relative positions). It matches CpuBackend op for op (tensor/cpu_cross_attention.cpp): lse of
// the undropped probabilities, the dropout index ((b * total_heads + head_offset + h) * q_seq +
// i) * kv_seq + j drawn by tensor::uniform_at as the flash kernel draws it, and the backward's
// delta_i = rowsum(dO_i * O_i).
//
// Simple rather than fast (cuDNN is to take over): a block of 128 threads per query row for the
// forward and dQ, per key row of a group for dK and dV, which loops over the group's query heads
// and every query, recomputing the probabilities from lse, and per (query row, head) for the
// bias gradient, which loops over the batch recomputing the score gradients. No float atomics:
// every sum is one thread's loop or a block reduction in a fixed order, the same bits on every
// run. Every column of q and kv is found through CrossAttentionShape's helpers (constexpr, so
// callable here under --expt-relaxed-constexpr), whichever the layout.
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/block_reduce.cuh"
#include "kernels/common.cuh"
#include "kernels/device_key_lengths.cuh"
#include "kernels/ops.hpp"
#include "tensor/random.hpp"

namespace megatron::kernels {
namespace {

constexpr int kThreads = 128;

struct Geometry {
  CrossAttentionShape s;  // for the column helpers
  int64_t batch, q_seq, kv_seq, heads, groups, dim, per_group;
  float scale;
  float dropout;     // 0: off
  float keep_scale;  // 1 / (1 - dropout)
  tensor::RngKey rng;
  int64_t total_heads;  // of the dropout numbering (heads when options.total_heads is 0)
  int64_t head_offset;
  bool causal;
  const float* bias;  // options.bias on the device; null: none
  int64_t bias_columns, bias_offset;
  const int* key_lengths;  // [batch] on the device; null: every key

  __device__ int64_t q_width() const { return s.q_width(); }
  __device__ int64_t kv_width() const { return s.kv_width(); }
  __device__ int64_t out_width() const { return s.out_width(); }
  __device__ int64_t keys(int64_t b) const { return key_lengths ? key_lengths[b] : kv_seq; }
  // The keys query i of sequence b attends to: the first visible(b, i).
  __device__ int64_t visible(int64_t b, int64_t i) const {
    const int64_t k = keys(b);
    return causal && i + 1 < k ? i + 1 : k;
  }
  __device__ float bias_at(int64_t h, int64_t i, int64_t j) const {
    return bias ? bias[(i * kv_seq + j) * bias_columns + bias_offset + h] : 0.0f;
  }
  // Query i of head h of sequence b; row 0 of group g's keys (values) in sequence b.
  template <typename T>
  __device__ T* query(T* q, int64_t b, int64_t i, int64_t h) const {
    return q + (b * q_seq + i) * q_width() + s.query_column(h);
  }
  template <typename T>
  __device__ T* keys_of(T* kv, int64_t b, int64_t g) const {
    return kv + b * kv_seq * kv_width() + s.key_column(g);
  }
  template <typename T>
  __device__ T* values_of(T* kv, int64_t b, int64_t g) const {
    return kv + b * kv_seq * kv_width() + s.value_column(g);
  }
  // Head h of out (or dout) row i of sequence b.
  template <typename T>
  __device__ T* out_row(T* out, int64_t b, int64_t i, int64_t h) const {
    return out + (b * q_seq + i) * out_width() + h * dim;
  }
  // The dropout multiplier of probability (i, j) of head h of sequence b: keep_scale or 0.
  __device__ float dropout_factor(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (dropout == 0.0f) return 1.0f;
    const auto index =
        static_cast<uint64_t>(((b * total_heads + head_offset + h) * q_seq + i) * kv_seq + j);
    return tensor::uniform_at(rng, index) >= dropout ? keep_scale : 0.0f;
  }
};

// Block (i, h, b): query i of head h of sequence b. Shared: its query [dim], then its scores,
// later its dropped probabilities [kv_seq].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* q, const T* kv, Geometry l, T* out, float* lse) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* s = shared + l.dim;
  __shared__ float scratch[kThreads / 32];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / l.per_group;
  const int64_t keys = l.visible(b, i), ld = l.kv_width();
  const T* qrow = l.query(q, b, i, h);
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) qs[d] = load(qrow, d);
  __syncthreads();
  const T* k = l.keys_of(kv, b, g);
  const T* v = l.values_of(kv, b, g);
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
    float dot = 0.0f;
    for (int64_t d = 0; d < l.dim; ++d) dot += qs[d] * load(k + j * ld, d);
    s[j] = dot * l.scale + l.bias_at(h, i, j);
    max = fmaxf(max, s[j]);
  }
  max = block_reduce<kThreads, true>(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
    s[j] = expf(s[j] - max);
    sum += s[j];
  }
  sum = block_reduce<kThreads, false>(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
    s[j] *= inv * l.dropout_factor(b, h, i, j);
  }
  // The normaliser is of the undropped probabilities, as the flash kernel's lse is.
  if (threadIdx.x == 0) lse[(b * l.heads + h) * l.q_seq + i] = max + logf(sum);
  __syncthreads();
  T* orow = l.out_row(out, b, i, h);
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < keys; ++j) acc += s[j] * load(v + j * ld, d);
    store(orow, d, acc);
  }
}

// Block (i, h, b): dQ of query i of head h of sequence b, and its delta = rowsum(dO * O) into
// `delta` [batch, heads, q_seq] for the dK/dV and bias kernels. Shared: the query and its output
// gradient [dim each], then the score gradients times the scale [kv_seq].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const T* q, const T* kv, const T* out, const T* dout, const float* lse, Geometry l,
              float* delta, T* dq) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* gs = shared + l.dim;
  float* ds = shared + 2 * l.dim;
  __shared__ float scratch[kThreads / 32];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / l.per_group;
  const int64_t keys = l.visible(b, i), ld = l.kv_width();
  const T* qrow = l.query(q, b, i, h);
  const T* orow = l.out_row(out, b, i, h);
  const T* grow = l.out_row(dout, b, i, h);
  float partial = 0.0f;
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    qs[d] = load(qrow, d);
    gs[d] = load(grow, d);
    partial += gs[d] * load(orow, d);
  }
  // The reduction's barriers also publish qs and gs.
  const float row_delta = block_reduce<kThreads, false>(partial, scratch);
  const int64_t at = (b * l.heads + h) * l.q_seq + i;
  if (threadIdx.x == 0) delta[at] = row_delta;
  const float row_lse = lse[at];
  const T* k = l.keys_of(kv, b, g);
  const T* v = l.values_of(kv, b, g);
  for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
    float score = 0.0f, dp = 0.0f;
    for (int64_t d = 0; d < l.dim; ++d) {
      score += qs[d] * load(k + j * ld, d);
      dp += gs[d] * load(v + j * ld, d);
    }
    const float p = expf(score * l.scale + l.bias_at(h, i, j) - row_lse);
    ds[j] = p * (dp * l.dropout_factor(b, h, i, j) - row_delta) * l.scale;
  }
  __syncthreads();
  // Packed, dq is also dkv: only this query's columns are written here.
  T* dqrow = l.query(dq, b, i, h);
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < keys; ++j) acc += ds[j] * load(k + j * ld, d);
    store(dqrow, d, acc);
  }
}

// Block (j, g, b): dK and dV of key j of group g of sequence b, summed over the group's query
// heads in order and each head's queries in order. Shared: the key and value [dim each], their
// gradients' accumulators [dim each], then per query of the current head its dropped probability
// and its score gradient times the scale [q_seq each].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(const T* q, const T* kv, const T* dout, const float* lse, const float* delta,
                Geometry l, T* dkv) {
  extern __shared__ float shared[];
  float* ks = shared;
  float* vs = shared + l.dim;
  float* dk = shared + 2 * l.dim;
  float* dv = shared + 3 * l.dim;
  float* pz = shared + 4 * l.dim;
  float* ds = pz + l.q_seq;
  const int64_t j = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int64_t ld = l.kv_width(), q_ld = l.q_width(), out_ld = l.out_width();
  // Packed, dkv is also dq: only this group's key and value columns are written here.
  T* dk_row = l.keys_of(dkv, b, g) + j * ld;
  T* dv_row = l.values_of(dkv, b, g) + j * ld;
  if (j >= l.keys(b)) {  // a masked key: read by no query
    for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
      store(dk_row, d, 0.0f);
      store(dv_row, d, 0.0f);
    }
    return;
  }
  const T* k = l.keys_of(kv, b, g) + j * ld;
  const T* v = l.values_of(kv, b, g) + j * ld;
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    ks[d] = load(k, d);
    vs[d] = load(v, d);
    dk[d] = 0.0f;  // each thread owns the accumulators of its channels
    dv[d] = 0.0f;
  }
  __syncthreads();
  for (int64_t h = g * l.per_group; h < (g + 1) * l.per_group; ++h) {
    const T* q_head = l.query(q, b, 0, h);
    const T* g_head = l.out_row(dout, b, 0, h);
    const int64_t at = (b * l.heads + h) * l.q_seq;
    for (int64_t i = threadIdx.x; i < l.q_seq; i += kThreads) {
      if (l.causal && i < j) {  // the key comes after the query
        pz[i] = 0.0f;
        ds[i] = 0.0f;
        continue;
      }
      float score = 0.0f, dp = 0.0f;
      for (int64_t d = 0; d < l.dim; ++d) {
        score += load(q_head + i * q_ld, d) * ks[d];
        dp += load(g_head + i * out_ld, d) * vs[d];
      }
      const float p = expf(score * l.scale + l.bias_at(h, i, j) - lse[at + i]);
      const float z = l.dropout_factor(b, h, i, j);
      pz[i] = p * z;
      ds[i] = p * (dp * z - delta[at + i]) * l.scale;
    }
    __syncthreads();
    for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
      float acc_k = 0.0f, acc_v = 0.0f;
      for (int64_t i = 0; i < l.q_seq; ++i) {
        acc_k += ds[i] * load(q_head + i * q_ld, d);
        acc_v += pz[i] * load(g_head + i * out_ld, d);
      }
      dk[d] += acc_k;
      dv[d] += acc_v;
    }
    __syncthreads();  // the next head overwrites pz and ds
  }
  for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
    store(dk_row, d, dk[d]);
    store(dv_row, d, dv[d]);
  }
}

// Block (i, h): the bias gradient of query i of head h, dbias[(i * kv_seq + j) * bias_columns +
// bias_offset + h] += sum over b of dS(b, h, i, j) = P * (dP~ * dropout - delta), each thread
// summing its keys over the batch in order. Shared: the query and its output gradient [dim each],
// then the sums [kv_seq].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dbias_kernel(const T* q, const T* kv, const T* dout, const float* lse, const float* delta,
                 Geometry l, float* dbias) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* gs = shared + l.dim;
  float* acc = shared + 2 * l.dim;
  const int64_t i = blockIdx.x, h = blockIdx.y, g = h / l.per_group;
  const int64_t ld = l.kv_width();
  for (int64_t j = threadIdx.x; j < l.kv_seq; j += kThreads) acc[j] = 0.0f;
  for (int64_t b = 0; b < l.batch; ++b) {
    __syncthreads();  // the previous sequence's readers are done with qs and gs
    const T* qrow = l.query(q, b, i, h);
    const T* grow = l.out_row(dout, b, i, h);
    for (int64_t d = threadIdx.x; d < l.dim; d += kThreads) {
      qs[d] = load(qrow, d);
      gs[d] = load(grow, d);
    }
    __syncthreads();
    const int64_t keys = l.visible(b, i);
    const int64_t at = (b * l.heads + h) * l.q_seq + i;
    const float row_lse = lse[at], row_delta = delta[at];
    const T* k = l.keys_of(kv, b, g);
    const T* v = l.values_of(kv, b, g);
    for (int64_t j = threadIdx.x; j < keys; j += kThreads) {
      float score = 0.0f, dp = 0.0f;
      for (int64_t d = 0; d < l.dim; ++d) {
        score += qs[d] * load(k + j * ld, d);
        dp += gs[d] * load(v + j * ld, d);
      }
      const float p = expf(score * l.scale + l.bias_at(h, i, j) - row_lse);
      acc[j] += p * (dp * l.dropout_factor(b, h, i, j) - row_delta);
    }
  }
  float* column = dbias + i * l.kv_seq * l.bias_columns + l.bias_offset + h;
  for (int64_t j = threadIdx.x; j < l.kv_seq; j += kThreads) column[j * l.bias_columns] += acc[j];
}

// Whether the bytes of a and b overlap.
bool overlap(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const std::byte*>(a.raw());
  const auto* pb = static_cast<const std::byte*>(b.raw());
  return a.bytes() > 0 && b.bytes() > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
}

void require_float(const Tensor& x, const char* what, tensor::DType dtype, int64_t numel,
                   const char* layout, const char* op) {
  require_device(x, op);
  require(x.dtype() == dtype, op,
          std::string(what) + " is " + std::string(tensor::name(x.dtype())) + ", not q's " +
              std::string(tensor::name(dtype)));
  require(x.numel() == numel, op,
          std::string(what) + " " + tensor::to_string(x.shape()) + " is not " + layout);
}

constexpr const char* kQRows = "[batch * q_seq, heads * head_dim]";
constexpr const char* kKvRows = "[batch * kv_seq, 2 * groups * head_dim]";
constexpr const char* kPackedRows = "[batch * seq, (heads + 2 * groups) * head_dim]";

// Checks what both passes share (as CpuBackend does) and returns the kernels' view of it.
Geometry geometry(const Tensor& q, const Tensor& kv, const Tensor& lse,
                  const CrossAttentionShape& s, const AttentionOptions& o, const char* op) {
  require(s.batch >= 0 && s.q_seq >= 0 && s.kv_seq > 0 && s.head_dim > 0 && s.groups > 0 &&
              s.heads > 0 && s.heads % s.groups == 0,
          op,
          "bad shape (kv_seq and head_dim must be positive, heads a positive multiple of "
          "groups)");
  require(!s.packed || s.q_seq == s.kv_seq, op,
          "a packed shape is self-attention: q_seq (" + std::to_string(s.q_seq) +
              ") must equal kv_seq (" + std::to_string(s.kv_seq) + ")");
  require(!o.causal || s.q_seq == s.kv_seq, op,
          "a causal mask needs as many queries as keys: q_seq " + std::to_string(s.q_seq) +
              ", kv_seq " + std::to_string(s.kv_seq));
  require(o.dropout >= 0.0f && o.dropout < 1.0f, op, "dropout must be in [0, 1)");
  require(o.first_keys.empty(), op,
          "takes no packed documents (options.first_keys): use attention_forward and _backward");
  require(o.key_lengths.empty() || int64_t(o.key_lengths.size()) == s.batch, op,
          "key_lengths has " + std::to_string(o.key_lengths.size()) + " entries for a batch of " +
              std::to_string(s.batch));
  for (const int64_t keys : o.key_lengths)
    require(
        keys >= 1 && keys <= s.kv_seq, op,
        "a key length of " + std::to_string(keys) + " is outside 1.." + std::to_string(s.kv_seq));
  require(s.q_seq <= INT_MAX && s.kv_seq <= INT_MAX && s.batch <= 65535 && s.heads <= 65535, op,
          "shape too large (sequences below 2^31, batch and heads at most 65535)");
  if (o.bias) {
    const Tensor& bias = *o.bias;
    require_device(bias, op);
    require(bias.dtype() == tensor::DType::F32, op, "options.bias must be f32");
    require(o.bias_offset >= 0 && o.bias_offset + s.heads <= o.bias_columns, op,
            "the bias columns " + std::to_string(o.bias_offset) + ".." +
                std::to_string(o.bias_offset + s.heads - 1) + " of this call's heads are " +
                "outside its " + std::to_string(o.bias_columns) + " columns");
    require(bias.numel() == s.q_seq * s.kv_seq * o.bias_columns, op,
            "options.bias " + tensor::to_string(bias.shape()) + " is not [q_seq, kv_seq, " +
                std::to_string(o.bias_columns) + "]");
  }
  require_device(q, op);
  require(tensor::is_floating(q.dtype()), op,
          "q must be f32, bf16 or f16, got " + std::string(tensor::name(q.dtype())));
  require(q.numel() == s.batch * s.q_seq * s.q_width(), op,
          "q " + tensor::to_string(q.shape()) + " is not " + (s.packed ? kPackedRows : kQRows));
  if (s.packed) {
    require(kv.raw() == q.raw() && kv.numel() == q.numel() && kv.dtype() == q.dtype(), op,
            "with shape.packed, q and kv must be the same fused qkv tensor");
  }
  require_float(kv, "kv", q.dtype(), s.batch * s.kv_seq * s.kv_width(),
                s.packed ? kPackedRows : kKvRows, op);
  require_device(lse, op);
  require(lse.dtype() == tensor::DType::F32 && lse.numel() == s.batch * s.heads * s.q_seq, op,
          "lse must be f32 [batch, heads, q_seq]");
  return Geometry{.s = s,
                  .batch = s.batch,
                  .q_seq = s.q_seq,
                  .kv_seq = s.kv_seq,
                  .heads = s.heads,
                  .groups = s.groups,
                  .dim = s.head_dim,
                  .per_group = s.heads / s.groups,
                  .scale = o.scale,
                  .dropout = o.dropout,
                  .keep_scale = 1.0f / (1.0f - o.dropout),
                  .rng = o.rng,
                  .total_heads = o.total_heads > 0 ? o.total_heads : s.heads,
                  .head_offset = o.head_offset,
                  .causal = o.causal,
                  .bias = o.bias ? static_cast<const float*>(o.bias->raw()) : nullptr,
                  .bias_columns = o.bias_columns,
                  .bias_offset = o.bias_offset,
                  .key_lengths = nullptr};
}

// Opts a kernel into `bytes` of dynamic shared memory, refusing what the device cannot give.
template <typename Kernel>
void allow_shared(Kernel* kernel, size_t bytes, const char* op) {
  int device = 0, limit = 0;
  check_cuda(cudaGetDevice(&device), op);
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  // The static reduction scratch takes a little beside the dynamic part.
  require(bytes + 1024 <= size_t(limit), op,
          "the sequences are too long for one block's shared memory (" + std::to_string(bytes) +
              " bytes)");
  if (bytes > 48 * 1024) {
    check_cuda(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), op);
  }
}

}  // namespace

void cross_attention_forward(cudaStream_t stream, const Tensor& q, const Tensor& kv,
                             const CrossAttentionShape& shape, const AttentionOptions& options,
                             Tensor& out, Tensor& lse) {
  const char* op = "cross_attention_forward";
  Geometry l = geometry(q, kv, lse, shape, options, op);
  const int64_t out_numel = shape.batch * shape.q_seq * shape.out_width();
  require_float(out, "out", q.dtype(), out_numel, kQRows, op);
  require(!overlap(out, q), op, "out must not overlap q");
  if (out_numel == 0) return;
  const DeviceKeyLengths key_lengths(stream, options.key_lengths, op);
  l.key_lengths = key_lengths.get();
  const size_t shared = size_t(l.dim + l.kv_seq) * sizeof(float);
  const dim3 grid(unsigned(l.q_seq), unsigned(l.heads), unsigned(l.batch));
  with_floats(q, [&](auto* p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    allow_shared(forward_kernel<T>, shared, op);
    forward_kernel<T><<<grid, kThreads, shared, stream>>>(p, static_cast<const T*>(kv.raw()), l,
                                                          static_cast<T*>(out.raw()),
                                                          static_cast<float*>(lse.raw()));
  });
  check_launch(op);
}

void cross_attention_backward(cudaStream_t stream, Workspace& workspace, const Tensor& q,
                              const Tensor& kv, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, const CrossAttentionShape& shape,
                              const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                              Tensor* dbias) {
  const char* op = "cross_attention_backward";
  Geometry l = geometry(q, kv, lse, shape, options, op);
  const int64_t out_numel = shape.batch * shape.q_seq * shape.out_width();
  require_float(out, "out", q.dtype(), out_numel, kQRows, op);
  require_float(dout, "dout", q.dtype(), out_numel, kQRows, op);
  require_float(dq, "dq", q.dtype(), q.numel(), shape.packed ? kPackedRows : kQRows, op);
  require_float(dkv, "dkv", q.dtype(), kv.numel(), shape.packed ? kPackedRows : kKvRows, op);
  if (shape.packed) {
    require(dq.raw() == dkv.raw(), op,
            "with shape.packed, dq and dkv must be the same dqkv tensor (each gets its own "
            "columns)");
  } else {
    require(!overlap(dq, dkv), op, "dq and dkv must not overlap");
  }
  for (const Tensor* input : {&q, &kv})
    require(!overlap(*input, dq) && !overlap(*input, dkv), op,
            "the gradients must not overlap q or kv");
  if (options.bias) {
    require(dbias != nullptr, op,
            "options.bias is set: its gradient needs a dbias tensor to accumulate into");
    require_device(*dbias, op);
    require(dbias->dtype() == tensor::DType::F32 && dbias->shape() == options.bias->shape(), op,
            "dbias must be f32 of the bias's shape " + tensor::to_string(options.bias->shape()));
    require(!overlap(*dbias, *options.bias), op, "dbias must not overlap the bias");
  } else {
    require(dbias == nullptr, op, "a dbias without options.bias: there is no bias gradient");
  }
  if (kv.numel() == 0) return;
  if (out_numel == 0) {  // no queries (not packed): nothing reads the keys and values
    check_cuda(cudaMemsetAsync(dkv.raw(), 0, dkv.bytes(), stream), op);  // 0.0 in every dtype
    return;
  }
  // delta [batch, heads, q_seq] f32, written by the dQ kernel and read by the dK/dV and bias
  // kernels.
  auto* delta = static_cast<float*>(
      workspace.get(size_t(l.batch * l.heads * l.q_seq) * sizeof(float), stream));
  const DeviceKeyLengths key_lengths(stream, options.key_lengths, op);
  l.key_lengths = key_lengths.get();
  const size_t dq_shared = size_t(2 * l.dim + l.kv_seq) * sizeof(float);
  const size_t dkdv_shared = size_t(4 * l.dim + 2 * l.q_seq) * sizeof(float);
  const size_t dbias_shared = dq_shared;
  const dim3 dq_grid(unsigned(l.q_seq), unsigned(l.heads), unsigned(l.batch));
  const dim3 dkdv_grid(unsigned(l.kv_seq), unsigned(l.groups), unsigned(l.batch));
  const dim3 dbias_grid(unsigned(l.q_seq), unsigned(l.heads));
  with_floats(q, [&](auto* p) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    allow_shared(dq_kernel<T>, dq_shared, op);
    allow_shared(dkdv_kernel<T>, dkdv_shared, op);
    if (dbias) allow_shared(dbias_kernel<T>, dbias_shared, op);
    const auto* k = static_cast<const T*>(kv.raw());
    const auto* g = static_cast<const T*>(dout.raw());
    const auto* lse_data = static_cast<const float*>(lse.raw());
    // Packed, dq and dkv are one tensor: the dQ kernel writes its query columns, the dK/dV
    // kernel its key and value columns.
    dq_kernel<T><<<dq_grid, kThreads, dq_shared, stream>>>(
        p, k, static_cast<const T*>(out.raw()), g, lse_data, l, delta, static_cast<T*>(dq.raw()));
    check_launch(op);
    dkdv_kernel<T><<<dkdv_grid, kThreads, dkdv_shared, stream>>>(p, k, g, lse_data, delta, l,
                                                                 static_cast<T*>(dkv.raw()));
    check_launch(op);
    if (dbias) {
      dbias_kernel<T><<<dbias_grid, kThreads, dbias_shared, stream>>>(
          p, k, g, lse_data, delta, l, static_cast<float*>(dbias->raw()));
    }
  });
  check_launch(op);
}

}  // namespace megatron::kernels
