// A Backend that forwards every op to another and, while a profiled step runs, records each
// call: its name, shapes, FLOPs and bytes, and clock marks around it (`megatron run --profile`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/backend.hpp"

namespace megatron::tensor {

// One recorded op call, timed.
struct ProfiledCall {
  std::string op;          // the Backend method: "gemm", "attention_forward", ...
  std::string shapes;      // its main tensors' shapes and dtype, e.g. "[512, 64] x [192, 64]^T bf16"
  DType dtype = DType::F32;  // what its arithmetic runs in (which peak FLOP/s applies)
  double flops = 0.0;      // floating-point operations; 0 for ops bound by memory traffic
  double bytes = 0.0;      // tensor bytes read plus bytes written (read-modify-write counts twice)
  double start_ms = 0.0;   // from the first profiled step's start
  double ms = 0.0;         // how long the device spent on it
  int64_t allocated_bytes = 0;  // live tensor memory after it
};

struct ProfiledStep {
  int64_t iteration = 0;
  double start_ms = 0.0;
  double ms = 0.0;
};

// Everything recorded between start() and finish().
struct ProfileRecord {
  std::string device;  // the backend's description
  std::vector<ProfiledStep> steps;
  std::vector<ProfiledCall> calls;
  int64_t peak_bytes = 0;  // the most live tensor memory during the profiled steps
};

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner);

  // Profiling: start() once, then begin_step()/end_step() around each profiled iteration (only
  // ops between them are recorded), then finish(), which synchronises and reads the clock.
  void start();
  void begin_step(int64_t iteration);
  void end_step();
  ProfileRecord finish();
  bool started() const { return started_; }

  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  Backend& underlying() override { return inner_->underlying(); }
  std::unique_ptr<OpClock> make_clock() override { return inner_->make_clock(); }

  Tensor empty(const Shape& shape, DType dtype) override { return inner_->empty(shape, dtype); }
  void fill(Tensor& x, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void read(const Tensor& x, void* host) override;
  void write(Tensor& x, const void* host) override;
  MemoryStats memory() const override { return inner_->memory(); }
  void reset_peak_memory() override { inner_->reset_peak_memory(); }
  void synchronize() override { inner_->synchronize(); }

  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
            float beta) override;
  void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                 Tensor& c) override;
  void gemm_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                      const Tensor& bias, Tensor& pre, Tensor& act) override;
  void gemm_dgelu_bgrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                        const Tensor& pre, Tensor& dpre, Tensor* dbias) override;
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
  void dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                   RngKey key) override;
  void bias_dropout_add(Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out,
                        float p, RngKey key) override;

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
                             Tensor& lse, VocabShard shard) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              const Tensor& dloss, Tensor& dlogits, VocabShard shard) override;

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
  class Scope;
  struct PendingCall {
    ProfiledCall call;
    int64_t begin = 0, end = 0;  // clock marks
  };
  struct PendingStep {
    int64_t iteration = 0, begin = 0, end = -1;
  };

  std::unique_ptr<Backend> inner_;
  std::unique_ptr<OpClock> clock_;
  bool started_ = false;
  bool recording_ = false;
  int64_t origin_ = 0;  // the mark every time is measured from
  std::vector<PendingStep> steps_;
  std::vector<PendingCall> calls_;
};

// The FLOPs the profile credits an op with (the convention docs/profiling.md states): a GEMM
// 2mnk; causal self-attention half of full attention's 4 * batch * heads * seq^2 * head_dim
// (Megatron's convention), its backward 2.5 times its forward (the five matrix products of a
// flash backward against the forward's two).
double gemm_flops(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b);
double attention_flops(const AttentionShape& shape, bool causal);
double cross_attention_flops(const CrossAttentionShape& shape, bool causal);
constexpr double kAttentionBackwardFactor = 2.5;

}  // namespace megatron::tensor
