// The CUDA backend: cuBLASLt GEMMs, kernels/ for every other op, a caching device allocator and
// one compute stream. Built when nvcc is found; constructing it without a GPU throws UserError.
#pragma once

#include <memory>
#include <string>

#include "tensor/backend.hpp"

namespace megatron::tensor {

struct CudaOptions {
  int device = 0;          // CUDA device index (the launcher picks it from the local rank)
  bool allow_tf32 = true;  // f32 GEMMs may use TF32 tensor cores (precision.allow_tf32)
  // bf16/f16 attention through cuDNN where it supports the options (tensor/cuda_cudnn_attention);
  // false, or MEGATRON_CUDNN_ATTENTION=0 in the environment, keeps the flash kernels for all.
  bool cudnn_attention = true;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::Cuda; }
  std::string description() const override;
  int device_index() const;
  // The compute stream (a cudaStream_t): communication streams order themselves after it.
  void* stream() const;
  // Device memory the caching allocator holds (in use or cached for reuse), now and at most:
  // once warm, a training step reserves nothing new.
  int64_t reserved_bytes() const;
  int64_t reserved_high_bytes() const;
  void release_cached_memory();

  Tensor empty(const Shape& shape, DType dtype) override;
  void fill(Tensor& x, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void read(const Tensor& x, void* host) override;
  void write(Tensor& x, const void* host) override;
  MemoryStats memory() const override;
  void reset_peak_memory() override;
  void synchronize() override;
  // CUDA events recorded on the compute stream: timing that does not stall the GPU.
  std::unique_ptr<OpClock> make_clock() override;

  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
            float beta) override;
  void gemm_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                      const Tensor& bias, Tensor& pre, Tensor& act) override;
  void gemm_dgelu_bgrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                        const Tensor& pre, Tensor& dpre, Tensor* dbias) override;
  void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                 Tensor& c) override;
  void gemm_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                    float alpha, float beta) override;

  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void axpy(float alpha, const Tensor& x, Tensor& y) override;
  void scale(Tensor& x, float alpha) override;
  void bias_add(Tensor& x, const Tensor& bias) override;
  void bias_grad(const Tensor& dy, Tensor& dbias) override;

  void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) override;
  void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, bool tanh_approx) override;
  void swiglu_forward(const Tensor& x, Tensor& y) override;
  void swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) override;
  void geglu_forward(const Tensor& x, Tensor& y) override;
  void geglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) override;

  void dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) override;
  void dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) override;
  void bias_dropout_add(Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out,
                        float p, RngKey key) override;
  void dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                   RngKey key) override;

  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                          Tensor& y, Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                           const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                           Tensor& dbeta) override;
  void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                        Tensor& rstd) override;
  void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma) override;
  void qk_norm_forward(const Tensor& qkv, const AttentionShape& shape, const Tensor& q_gamma,
                       const Tensor& k_gamma, float eps, Tensor& out, Tensor& rstd) override;
  void qk_norm_backward(const Tensor& dout, const Tensor& qkv, const AttentionShape& shape,
                        const Tensor& q_gamma, const Tensor& k_gamma, const Tensor& rstd,
                        Tensor& dqkv, Tensor& dq_gamma, Tensor& dk_gamma) override;

  void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out, int64_t row_offset,
                         bool accumulate) override;
  void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable,
                          int64_t row_offset) override;

  void rotary(Tensor& qkv, const AttentionShape& shape, const RotaryOptions& options,
              bool inverse) override;
  void attention_forward(const Tensor& qkv, const AttentionShape& shape,
                         const AttentionOptions& options, Tensor& out, Tensor& lse) override;
  void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                          const Tensor& lse, const AttentionShape& shape,
                          const AttentionOptions& options, Tensor& dqkv) override;
  void attention_cached(const Tensor& qkv, const AttentionShape& shape, int64_t start, float scale,
                        Tensor& k_cache, Tensor& v_cache, Tensor& out) override;
  void attention_paged(const Tensor& qkv, const AttentionShape& shape, const Tensor& positions,
                       const Tensor& block_tables, float scale, Tensor& k_pool, Tensor& v_pool,
                       Tensor& out) override;
  void cross_attention_forward(const Tensor& q, const Tensor& kv, const CrossAttentionShape& shape,
                               const AttentionOptions& options, Tensor& out, Tensor& lse) override;
  void cross_attention_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                const Tensor& dout, const Tensor& lse,
                                const CrossAttentionShape& shape, const AttentionOptions& options,
                                Tensor& dq, Tensor& dkv, Tensor* dbias) override;

  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                             Tensor& lse, VocabShard shard = {}) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              const Tensor& dloss, Tensor& dlogits, VocabShard shard = {}) override;

  double sum(const Tensor& x) override;
  double dot(const Tensor& a, const Tensor& b) override;
  double sum_squares(const Tensor& x) override;
  bool all_finite(const Tensor& x) override;
  double sum_squares_many(std::span<const Tensor> xs) override;

  void normal(Tensor& x, float mean, float std, RngKey key) override;
  void adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWStep& step) override;
  void sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum,
                  const SgdStep& step) override;
  void adamw_update_many(std::span<const AdamWParam> params, const AdamWStep& step) override;

 private:
  void empty_product(Tensor& c, float beta);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace megatron::tensor
