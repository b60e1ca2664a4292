// The Backend: every piece of math the models and optimizers need, forward and backward, on
// one device. Model code calls only this; the CPU and CUDA backends implement it.
//
// Conventions that hold for every op:
// - Tensors are contiguous and row-major; "[n, c]" means any tensor viewed as n rows of c.
// - Floating inputs may be f32, bf16 or f16; math is f32. Outputs take their own dtype, so a
//   bf16 activation can produce an f32 gradient.
// - "accumulates" means the result is added to what the output holds (parameter gradients,
//   always f32); everything else overwrites.
// - Results never depend on the number of threads or the order work is scheduled in.
// - Host code must not read device memory directly: use read()/write().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>
#include <span>

#include "tensor/attention_spec.hpp"
#include "tensor/op_clock.hpp"
#include "tensor/op_params.hpp"
#include "tensor/tensor.hpp"

namespace megatron::tensor {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string description() const = 0;  // e.g. "cpu (OpenBLAS, 2 threads)"
  // Which implementation runs an attention of `spec` here (heads of `head_dim` channels stored
  // in `dtype`), or why this device cannot: the answer the planner records for every layer
  // (tensor::attention_support, which it asks by device before any backend exists).
  AttentionSupport supports(const AttentionSpec& spec, int64_t head_dim, DType dtype) const {
    return attention_support(device(), spec, head_dim, dtype);
  }

  // --- memory -------------------------------------------------------------------------------
  virtual Tensor empty(const Shape& shape, DType dtype) = 0;
  Tensor zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    fill(t, 0.0);
    return t;
  }
  virtual void fill(Tensor& x, double value) = 0;
  // dst = src (equal numel); converts between float dtypes, or copies equal integer dtypes.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  // Raw bytes between a tensor and host memory of x.bytes() bytes.
  virtual void read(const Tensor& x, void* host) = 0;
  virtual void write(Tensor& x, const void* host) = 0;
  virtual MemoryStats memory() const = 0;
  virtual void reset_peak_memory() = 0;
  virtual void synchronize() {}
  // A clock for timing this device's work (profiles, the op harness): the host's steady clock
  // here, CUDA events on the GPU.
  virtual std::unique_ptr<OpClock> make_clock() { return std::make_unique<HostClock>(); }
  // The backend that does the work: itself, or the one a wrapper (a profile) forwards to.
  // Device glue that needs the concrete backend (NCCL's stream) asks this.
  virtual Backend& underlying() { return *this; }

  // --- GEMM ---------------------------------------------------------------------------------
  // c = alpha * op(a) @ op(b) + beta * c for 2-D a, b, c; op transposes when asked. a and b
  // share a float dtype; c is f32 or that dtype.
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                    float alpha = 1.0f, float beta = 0.0f) = 0;
  // c = op(a) @ op(b) + bias[n] (bias of c's dtype, one per column): a linear layer's forward.
  // The CUDA backend fuses the bias into the GEMM's epilogue, saving a pass over c.
  virtual void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                         const Tensor& bias, Tensor& c) {
    gemm(a, trans_a, b, trans_b, c);
    bias_add(c, bias);
  }
  // An MLP's first layer with its tanh-GeLU: pre = op(a) @ op(b) + bias, kept for the backward,
  // and act = gelu_tanh(pre). The CUDA backend runs it as one cuBLASLt GEMM (GELU_AUX_BIAS).
  virtual void gemm_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                              const Tensor& bias, Tensor& pre, Tensor& act) {
    gemm_bias(a, trans_a, b, trans_b, bias, pre);
    gelu_forward(pre, act, true);
  }
  // The gradient through an MLP's second layer and the tanh-GeLU before it: dpre =
  // (op(a) @ op(b)) * gelu_tanh'(pre), and dbias (the first layer's bias gradient; may be null)
  // accumulates dpre's column sums. CUDA: one cuBLASLt GEMM (DGELU_BGRAD).
  virtual void gemm_dgelu_bgrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                const Tensor& pre, Tensor& dpre, Tensor* dbias) {
    Tensor dact = empty(dpre.shape(), dpre.dtype());
    gemm(a, trans_a, b, trans_b, dact);
    gelu_backward(dact, pre, dpre, true);
    if (dbias) bias_grad(dpre, *dbias);
  }
  // The same for each of the leading dimension's matrices of 3-D a, b, c.
  virtual void gemm_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                            Tensor& c, float alpha = 1.0f, float beta = 0.0f) = 0;

  // --- elementwise --------------------------------------------------------------------------
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;  // out may alias a or b
  virtual void axpy(float alpha, const Tensor& x, Tensor& y) = 0;       // y += alpha * x
  virtual void scale(Tensor& x, float alpha) = 0;                       // x *= alpha
  virtual void bias_add(Tensor& x, const Tensor& bias) = 0;             // x[n, c] += bias[c]
  virtual void bias_grad(const Tensor& dy, Tensor& dbias) = 0;  // accumulates sum_n dy[n, c]

  // --- activations --------------------------------------------------------------------------
  virtual void gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) = 0;
  virtual void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, bool tanh_approx) = 0;
  // x [n, 2f] holds [gate | up] per row; y [n, f] = silu(gate) * up.
  virtual void swiglu_forward(const Tensor& x, Tensor& y) = 0;
  virtual void swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) = 0;
  // GeGLU with the tanh-approximated GeLU (T5 v1.1's gated-gelu): y = gelu_tanh(gate) * up,
  // x and y laid out as for SwiGLU.
  virtual void geglu_forward(const Tensor& x, Tensor& y) = 0;
  virtual void geglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) = 0;

  // --- dropout (nothing stored: the mask is recomputed from the key) --------------------------
  // keep element i when uniform(key, i) >= p; kept elements are scaled by 1 / (1 - p).
  virtual void dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) = 0;
  virtual void dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) = 0;
  // out = residual + dropout(x): the residual connection after attention and MLP.
  virtual void dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                           RngKey key) = 0;
  // out = residual + dropout(x + bias[c]), with x + bias rounded to x's dtype first (as
  // bias_add stores it): a row-parallel layer's bias after its reduction. x may be overwritten.
  // The CUDA backend runs it as one kernel.
  virtual void bias_dropout_add(Tensor& x, const Tensor& bias, const Tensor& residual,
                                Tensor& out, float p, RngKey key) {
    bias_add(x, bias);
    dropout_add(x, residual, out, p, key);
  }

  // --- normalisation over the last dimension -----------------------------------------------
  // mean and rstd are f32 [n], saved for the backward pass.
  virtual void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  float eps, Tensor& y, Tensor& mean, Tensor& rstd) = 0;
  // dx overwritten; dgamma, dbeta accumulate.
  virtual void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                   const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                   Tensor& dgamma, Tensor& dbeta) = 0;
  virtual void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                                Tensor& rstd) = 0;
  virtual void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                 const Tensor& rstd, Tensor& dx, Tensor& dgamma) = 0;
  // Q/K norm (Qwen3's, OLMo 2's; Megatron's --qk-layernorm with RMSNorm): RMS norm over each
  // query and key head of fused qkv rows (AttentionShape's layout; rows = qkv.numel() / its
  // width), query heads scaled by q_gamma and key heads by k_gamma ([head_dim] each), value
  // heads copied. out: qkv's shape and dtype. rstd f32 [rows, heads + groups]: each row's
  // normalised heads in the order they sit in it. Each head computes what rms_norm_forward
  // computes for a row of head_dim.
  virtual void qk_norm_forward(const Tensor& qkv, const AttentionShape& shape,
                               const Tensor& q_gamma, const Tensor& k_gamma, float eps, Tensor& out,
                               Tensor& rstd) = 0;
  // dqkv overwritten (value heads: dout's); dq_gamma and dk_gamma (f32) accumulate, summed in
  // an order that depends on the shapes alone.
  virtual void qk_norm_backward(const Tensor& dout, const Tensor& qkv, const AttentionShape& shape,
                                const Tensor& q_gamma, const Tensor& k_gamma, const Tensor& rstd,
                                Tensor& dqkv, Tensor& dq_gamma, Tensor& dk_gamma) = 0;

  // --- embeddings ----------------------------------------------------------------------------
  // out[i] = table[ids[i] - row_offset] (i32 ids); ids outside the table's rows give zeros (a
  // vocab-parallel shard). With accumulate, out[i] += instead.
  virtual void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out,
                                 int64_t row_offset = 0, bool accumulate = false) = 0;
  // dtable[ids[i] - row_offset] += dout[i] for ids inside the table; deterministic.
  virtual void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable,
                                  int64_t row_offset = 0) = 0;

  // --- attention -----------------------------------------------------------------------------
  virtual void rotary(Tensor& qkv, const AttentionShape& shape, const RotaryOptions& options,
                      bool inverse) = 0;  // in place on q and k; inverse rotates back
  // Memory-efficient (flash) attention: out [batch * seq, heads * head_dim], lse f32
  // [batch, heads, seq] (log-sum-exp of each scaled score row, saved for backward). Never holds
  // more than a block of one head's seq x seq scores per thread.
  virtual void attention_forward(const Tensor& qkv, const AttentionShape& shape,
                                 const AttentionOptions& options, Tensor& out, Tensor& lse) = 0;
  // dqkv (same shape as qkv) overwritten.
  virtual void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                                  const Tensor& lse, const AttentionShape& shape,
                                  const AttentionOptions& options, Tensor& dqkv) = 0;
  // Causal attention for generation. The `shape.seq` new tokens of each sequence (qkv rows
  // b * seq + t, as attention_forward's) sit at positions start..start + seq - 1, after `start`
  // tokens whose keys and values are already in the cache. Their keys and values are written
  // into k_cache and v_cache ([batch, groups, capacity, head_dim], one float dtype) at those
  // positions; then each query attends over the keys 0..its own position. out [batch * seq,
  // heads * head_dim]; start + seq <= capacity. No dropout: inference only.
  virtual void attention_cached(const Tensor& qkv, const AttentionShape& shape, int64_t start,
                                float scale, Tensor& k_cache, Tensor& v_cache, Tensor& out) = 0;
  // Continuous batching's attention over a paged key/value cache. qkv row r (shape.batch rows,
  // shape.seq 1) is a token at position positions[r] (I32 [rows]) of the sequence whose pool
  // blocks are block_tables' row r (I32 [rows, max_blocks]: block i holds its positions
  // i * block_size..). Every row's key and value are written at its position first; then each
  // query attends over its sequence's positions 0..positions[r]. k_pool, v_pool: [blocks,
  // groups, block_size, head_dim] of qkv's dtype; out [rows, heads * head_dim].
  virtual void attention_paged(const Tensor& qkv, const AttentionShape& shape,
                               const Tensor& positions, const Tensor& block_tables, float scale,
                               Tensor& k_pool, Tensor& v_pool, Tensor& out) = 0;

  // Cross-attention (CrossAttentionShape's layouts), with the whole score matrix of a head
  // materialised: out [batch * q_seq, heads * head_dim] (q's dtype), lse f32 [batch, heads,
  // q_seq]: log-sum-exp of each row of scores. q, kv and out share one float dtype; with
  // shape.packed q and kv are the same tensor. Score (b, h, i, j) = scale * q.k + bias (see
  // AttentionOptions::bias: f32, q_seq * kv_seq * bias_columns elements, bias_offset + heads <=
  // bias_columns). options.causal (only with q_seq == kv_seq): query i attends keys j <= i;
  // options.key_lengths (empty, or one per sequence in 1..kv_seq) masks keys at and after the
  // length; dropout on the probabilities with element index ((b * total_heads + head_offset + h) *
  // q_seq + i) * kv_seq + j, drawn exactly as attention_forward draws its dropout (the same
  // uniform_at of (rng, index)).
  virtual void cross_attention_forward(const Tensor& q, const Tensor& kv,
                                       const CrossAttentionShape& shape,
                                       const AttentionOptions& options, Tensor& out,
                                       Tensor& lse) = 0;
  // dq (q's shape) and dkv (kv's shape) overwritten; every tensor but lse and dbias of q's dtype.
  // Not packed: dq and dkv must not overlap. Packed: pass one dqkv tensor as both dq and dkv; its
  // query columns get dq, its key and value columns dk and dv, each element written once.
  // dbias: null when options.bias is null, else required: f32 of the bias's shape, accumulates
  // dbias[(i * kv_seq + j) * bias_columns + bias_offset + h] += sum over b of dscore(b, h, i, j),
  // summed in a fixed order; the columns of other heads are untouched.
  virtual void cross_attention_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                        const Tensor& dout, const Tensor& lse,
                                        const CrossAttentionShape& shape,
                                        const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                                        Tensor* dbias) = 0;

  // --- loss ----------------------------------------------------------------------------------
  // Per row of logits [n, v]: loss[i] = logsumexp(logits[i]) - logits[i, targets[i]], lse[i] =
  // logsumexp(logits[i]); loss and lse f32 [n], targets i32 [n].
  // A vocab shard (VocabShard) holds columns [first, first + v) of the vocabulary.
  virtual void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                                     Tensor& lse, VocabShard shard = {}) = 0;
  // dlogits[i] = dloss[i] * (softmax(logits[i]) - onehot(targets[i])); dlogits may be logits.
  // With a shard, lse must be the log-sum-exp over the whole vocabulary.
  virtual void cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                      const Tensor& lse, const Tensor& dloss, Tensor& dlogits,
                                      VocabShard shard = {}) = 0;

  // --- reductions (return to the host; the CUDA backend synchronises) -------------------------
  virtual double sum(const Tensor& x) = 0;          // accumulated in f64, deterministic
  virtual double dot(const Tensor& a, const Tensor& b) = 0;
  virtual double sum_squares(const Tensor& x) = 0;  // NaN/Inf propagate
  virtual bool all_finite(const Tensor& x) = 0;
  // The sum of sum_squares over tensors, added in their order: a gradient norm. The CUDA
  // backend reduces every tensor in one launch and synchronises once.
  virtual double sum_squares_many(std::span<const Tensor> xs) {
    double total = 0.0;
    for (const Tensor& x : xs) total += sum_squares(x);
    return total;
  }

  // --- initialisation and optimizers ---------------------------------------------------------
  // x[i] ~ N(mean, std) from Philox (Box-Muller on the pair of words of counter i / 2).
  virtual void normal(Tensor& x, float mean, float std, RngKey key) = 0;
  // master, m, v, grad f32 of equal numel.
  virtual void adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWStep& step) = 0;
  virtual void sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum,
                          const SgdStep& step) = 0;
  // adamw_update then copy(master, value) for every parameter; the CUDA backend updates many
  // tensors per launch (the optimizer step of a model is a handful of launches).
  virtual void adamw_update_many(std::span<const AdamWParam> params, const AdamWStep& step) {
    for (const AdamWParam& p : params) {
      AdamWStep own = step;
      own.weight_decay = p.weight_decay;
      Tensor master = p.master, m = p.m, v = p.v;  // views: the same storage
      adamw_update(master, p.grad, m, v, own);
      if (p.value.defined()) {
        Tensor value = p.value;
        copy(master, value);
      }
    }
  }
};

}  // namespace megatron::tensor
