// The CUDA backend's ops on device tensors, one function per Backend op (see
// tensor/backend.hpp for what each computes); CudaBackend forwards to these.
//
// Every function enqueues its work on `stream` and returns without waiting, except the
// reductions, which return a host value and so synchronise the stream. Shapes and dtypes are
// checked on the host and a mismatch throws std::logic_error("cuda backend: OP: ..."); a CUDA
// failure throws std::runtime_error naming the op. Scratch device memory comes from
// `workspace`, which is reused by the next op on the same stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/op_params.hpp"
#include "tensor/tensor.hpp"

namespace megatron::kernels {

using tensor::AdamWStep;
using tensor::AttentionOptions;
using tensor::AttentionShape;
using tensor::CrossAttentionShape;
using tensor::RngKey;
using tensor::RotaryOptions;
using tensor::SgdStep;
using tensor::Tensor;
using tensor::VocabShard;

// A growing scratch buffer for the ops of one stream, from the device's stream-ordered memory
// pool. get() returns the old buffer to the pool when it must grow (after the work already
// enqueued), so an op calls it once, before it enqueues any work.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
  void* get(size_t bytes, cudaStream_t stream);
  size_t capacity() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// --- memory and casts (elementwise.cu) -------------------------------------------------------
void fill(cudaStream_t stream, Tensor& x, double value);
// Float dtypes convert (round to nearest even); equal integer dtypes copy.
void copy(cudaStream_t stream, const Tensor& src, Tensor& dst);

// --- elementwise (elementwise.cu) ------------------------------------------------------------
void add(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& out);
void axpy(cudaStream_t stream, float alpha, const Tensor& x, Tensor& y);
void scale(cudaStream_t stream, Tensor& x, float alpha);
void bias_add(cudaStream_t stream, Tensor& x, const Tensor& bias);
void bias_grad(cudaStream_t stream, Workspace& workspace, const Tensor& dy, Tensor& dbias);

// --- activations and dropout (activations.cu) ------------------------------------------------
void gelu_forward(cudaStream_t stream, const Tensor& x, Tensor& y, bool tanh_approx);
void gelu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx,
                   bool tanh_approx);
void swiglu_forward(cudaStream_t stream, const Tensor& x, Tensor& y);
void swiglu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx);
void geglu_forward(cudaStream_t stream, const Tensor& x, Tensor& y);
void geglu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx);
void dropout_forward(cudaStream_t stream, const Tensor& x, Tensor& y, float p, RngKey key);
void dropout_backward(cudaStream_t stream, const Tensor& dy, Tensor& dx, float p, RngKey key);
void dropout_add(cudaStream_t stream, const Tensor& x, const Tensor& residual, Tensor& out,
                 float p, RngKey key);
// out = residual + dropout(x + bias[c]) in one pass, x + bias rounded to x's dtype first.
void bias_dropout_add(cudaStream_t stream, const Tensor& x, const Tensor& bias,
                      const Tensor& residual, Tensor& out, float p, RngKey key);

// --- normalisation (norm.cu) -----------------------------------------------------------------
void layer_norm_forward(cudaStream_t stream, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
void layer_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dy,
                         const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
void rms_norm_forward(cudaStream_t stream, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd);
void rms_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dy,
                       const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                       Tensor& dgamma);
// RMS norm of each query and key head of fused qkv rows (qk_norm.cu).
void qk_norm_forward(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                     const Tensor& q_gamma, const Tensor& k_gamma, float eps, Tensor& out,
                     Tensor& rstd);
void qk_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dout,
                      const Tensor& qkv, const AttentionShape& shape, const Tensor& q_gamma,
                      const Tensor& k_gamma, const Tensor& rstd, Tensor& dqkv, Tensor& dq_gamma,
                      Tensor& dk_gamma);

// --- embeddings (embedding.cu) ---------------------------------------------------------------
void embedding_forward(cudaStream_t stream, const Tensor& ids, const Tensor& table, Tensor& out,
                       int64_t row_offset, bool accumulate);
// Deterministic: each table row sums its tokens' gradients in token order.
void embedding_backward(cudaStream_t stream, Workspace& workspace, const Tensor& ids,
                        const Tensor& dout, Tensor& dtable, int64_t row_offset);

// --- attention (rotary.cu, attention.cu) -----------------------------------------------------
void rotary(cudaStream_t stream, Tensor& qkv, const AttentionShape& shape,
            const RotaryOptions& options, bool inverse);
// Flash attention: tiles of q, k, v in shared memory, online softmax, never a seq x seq matrix.
void attention_forward(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                       const AttentionOptions& options, Tensor& out, Tensor& lse);
void attention_backward(cudaStream_t stream, Workspace& workspace, const Tensor& qkv,
                        const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const AttentionShape& shape, const AttentionOptions& options,
                        Tensor& dqkv);
// Generation (cached_attention.cu): the new tokens' keys and values into the caches, and the
// queries after a prefill over the cached keys (one block per query and head).
void attention_cache_append(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                            int64_t start, Tensor& k_cache, Tensor& v_cache);
void attention_decode(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                      int64_t start, float scale, const Tensor& k_cache, const Tensor& v_cache,
                      Tensor& out);
// Continuous batching (paged_attention.cu): Backend::attention_paged, each row's key and value
// into its sequence's pool block, then one block per row and head over its sequence's positions.
void attention_paged(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                     const Tensor& positions, const Tensor& block_tables, float scale,
                     Tensor& k_pool, Tensor& v_pool, Tensor& out);

// Cross-attention (cross_attention.cu): one block per query row (forward, dQ, and the score
// bias's gradient, which loops over the batch) and per key row of a group (dK/dV, looping over
// the group's heads and queries); delta goes through `workspace`.
void cross_attention_forward(cudaStream_t stream, const Tensor& q, const Tensor& kv,
                             const CrossAttentionShape& shape, const AttentionOptions& options,
                             Tensor& out, Tensor& lse);
void cross_attention_backward(cudaStream_t stream, Workspace& workspace, const Tensor& q,
                              const Tensor& kv, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, const CrossAttentionShape& shape,
                              const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                              Tensor* dbias);

// --- loss (cross_entropy.cu) -----------------------------------------------------------------
void cross_entropy_forward(cudaStream_t stream, const Tensor& logits, const Tensor& targets,
                           Tensor& loss, Tensor& lse, VocabShard shard);
void cross_entropy_backward(cudaStream_t stream, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dloss, Tensor& dlogits,
                            VocabShard shard);

// --- reductions to the host (reduce.cu): f64 accumulation in a fixed order -------------------
double sum(cudaStream_t stream, Workspace& workspace, const Tensor& x);
double dot(cudaStream_t stream, Workspace& workspace, const Tensor& a, const Tensor& b);
double sum_squares(cudaStream_t stream, Workspace& workspace, const Tensor& x);
bool all_finite(cudaStream_t stream, Workspace& workspace, const Tensor& x);

// --- initialisation and optimizers (optimizer.cu) --------------------------------------------
void normal(cudaStream_t stream, Tensor& x, float mean, float std, RngKey key);
void adamw_update(cudaStream_t stream, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWStep& step);
void sgd_update(cudaStream_t stream, Tensor& master, const Tensor& grad, Tensor& momentum,
                const SgdStep& step);

// --- many tensors per launch (multi_tensor.cu) -----------------------------------------------
void adamw_update_many(cudaStream_t stream, std::span<const tensor::AdamWParam> params,
                       const AdamWStep& step);
double sum_squares_many(cudaStream_t stream, Workspace& workspace, std::span<const Tensor> xs);

}  // namespace megatron::kernels
