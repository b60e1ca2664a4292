#include "tensor/profiling_backend.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace megatron::tensor {
namespace {

double bytes_of(std::initializer_list<const Tensor*> tensors) {
  double total = 0.0;
  for (const Tensor* t : tensors) {
    if (t && t->defined()) total += double(t->bytes());
  }
  return total;
}

// Rows and columns of a tensor viewed as a matrix over its last dimension.
std::pair<int64_t, int64_t> matrix(const Tensor& t) {
  const int64_t cols = t.shape().empty() ? 1 : t.shape().back();
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

std::string dims(const Tensor& t) { return to_string(t.shape()); }

std::string gemm_shapes(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c) {
  return fmt::format("{}{} x {}{} -> {} {}", dims(a), ta ? "^T" : "", dims(b), tb ? "^T" : "",
                     dims(c), name(a.dtype()));
}

std::string one(const Tensor& x) { return fmt::format("{} {}", dims(x), name(x.dtype())); }

std::string attention_shapes(const AttentionShape& s, bool causal, DType dtype) {
  return fmt::format("batch {} seq {} heads {}/{} dim {}{} {}", s.batch, s.seq, s.heads, s.groups,
                     s.head_dim, causal ? " causal" : "", name(dtype));
}

std::string cross_shapes(const CrossAttentionShape& s, bool causal, DType dtype) {
  return fmt::format("batch {} q {} kv {} heads {}/{} dim {}{}{} {}", s.batch, s.q_seq, s.kv_seq,
                     s.heads, s.groups, s.head_dim, s.packed ? " packed" : "",
                     causal ? " causal" : "", name(dtype));
}

}  // namespace

double gemm_flops(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b) {
  const auto [ar, ac] = matrix(a);
  const auto [br, bc] = matrix(b);
  const double m = double(trans_a ? ac : ar), k = double(trans_a ? ar : ac);
  const double n = double(trans_b ? br : bc);
  return 2.0 * m * n * k;
}

double attention_flops(const AttentionShape& s, bool causal) {
  const double full =
      4.0 * double(s.batch) * double(s.heads) * double(s.seq) * double(s.seq) * double(s.head_dim);
  return causal ? full / 2.0 : full;
}

double cross_attention_flops(const CrossAttentionShape& s, bool causal) {
  const double full = 4.0 * double(s.batch) * double(s.heads) * double(s.q_seq) * double(s.kv_seq) *
                      double(s.head_dim);
  return causal ? full / 2.0 : full;
}

// Marks the clock around one op while a profiled step runs; does nothing otherwise.
// What a call is credited with, described only when it is recorded: outside the profiled steps
// a call costs one virtual call and one branch, no formatting.
struct Cost {
  std::string shapes;
  DType dtype = DType::F32;
  double flops = 0.0;
  double bytes = 0.0;
};

class ProfilingBackend::Scope {
 public:
  template <class Describe>
  Scope(ProfilingBackend& owner, const char* op, Describe&& describe)
      : owner_(owner), on_(owner.recording_) {
    if (!on_) return;
    Cost cost = describe();
    call_.call = {.op = op,
                  .shapes = std::move(cost.shapes),
                  .dtype = cost.dtype,
                  .flops = cost.flops,
                  .bytes = cost.bytes};
    call_.begin = owner_.clock_->mark();
  }
  ~Scope() {
    if (!on_) return;
    call_.end = owner_.clock_->mark();
    call_.call.allocated_bytes = owner_.inner_->memory().allocated_bytes;
    owner_.calls_.push_back(std::move(call_));
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  ProfilingBackend& owner_;
  bool on_;
  PendingCall call_;
};

ProfilingBackend::ProfilingBackend(std::unique_ptr<Backend> inner)
    : inner_(std::move(inner)), clock_(inner_->make_clock()) {}

void ProfilingBackend::start() {
  inner_->synchronize();
  clock_->clear();
  steps_.clear();
  calls_.clear();
  inner_->reset_peak_memory();
  origin_ = clock_->mark();
  started_ = true;
}

void ProfilingBackend::begin_step(int64_t iteration) {
  if (!started_) throw std::logic_error("profile: begin_step before start");
  steps_.push_back({.iteration = iteration, .begin = clock_->mark()});
  recording_ = true;
}

void ProfilingBackend::end_step() {
  if (!recording_) return;
  steps_.back().end = clock_->mark();
  recording_ = false;
}

ProfileRecord ProfilingBackend::finish() {
  end_step();
  inner_->synchronize();
  ProfileRecord record{.device = inner_->description(), .peak_bytes = inner_->memory().peak_bytes};
  for (const PendingStep& s : steps_) {
    record.steps.push_back({.iteration = s.iteration,
                            .start_ms = clock_->elapsed_ms(origin_, s.begin),
                            .ms = clock_->elapsed_ms(s.begin, s.end)});
  }
  record.calls.reserve(calls_.size());
  for (PendingCall& c : calls_) {
    c.call.start_ms = clock_->elapsed_ms(origin_, c.begin);
    c.call.ms = clock_->elapsed_ms(c.begin, c.end);
    record.calls.push_back(std::move(c.call));
  }
  calls_.clear();
  steps_.clear();
  clock_->clear();
  started_ = false;
  return record;
}

// --- memory ----------------------------------------------------------------------------------

void ProfilingBackend::fill(Tensor& x, double value) {
  Scope s(*this, "fill", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  inner_->fill(x, value);
}
void ProfilingBackend::copy(const Tensor& src, Tensor& dst) {
  Scope s(*this, "copy", [&] {
    return Cost{fmt::format("{} {} -> {}", dims(src), name(src.dtype()), name(dst.dtype())),
                src.dtype(), 0, bytes_of({&src, &dst})};
  });
  inner_->copy(src, dst);
}
void ProfilingBackend::read(const Tensor& x, void* host) {
  Scope s(*this, "read", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  inner_->read(x, host);
}
void ProfilingBackend::write(Tensor& x, const void* host) {
  Scope s(*this, "write", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  inner_->write(x, host);
}

// --- GEMM ------------------------------------------------------------------------------------

void ProfilingBackend::gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c,
                            float alpha, float beta) {
  Scope s(*this, "gemm", [&] {
    return Cost{gemm_shapes(a, ta, b, tb, c), a.dtype(), gemm_flops(a, ta, b, tb),
                bytes_of({&a, &b, &c}) + (beta != 0.0f ? double(c.bytes()) : 0.0)};
  });
  inner_->gemm(a, ta, b, tb, c, alpha, beta);
}
void ProfilingBackend::gemm_bias(const Tensor& a, bool ta, const Tensor& b, bool tb,
                                 const Tensor& bias, Tensor& c) {
  Scope s(*this, "gemm_bias", [&] {
    return Cost{gemm_shapes(a, ta, b, tb, c), a.dtype(), gemm_flops(a, ta, b, tb),
                bytes_of({&a, &b, &bias, &c})};
  });
  inner_->gemm_bias(a, ta, b, tb, bias, c);
}
void ProfilingBackend::gemm_bias_gelu(const Tensor& a, bool ta, const Tensor& b, bool tb,
                                      const Tensor& bias, Tensor& pre, Tensor& act) {
  Scope s(*this, "gemm_bias_gelu", [&] {
    return Cost{gemm_shapes(a, ta, b, tb, pre), a.dtype(), gemm_flops(a, ta, b, tb),
                bytes_of({&a, &b, &bias, &pre, &act})};
  });
  inner_->gemm_bias_gelu(a, ta, b, tb, bias, pre, act);
}
void ProfilingBackend::gemm_dgelu_bgrad(const Tensor& a, bool ta, const Tensor& b, bool tb,
                                        const Tensor& pre, Tensor& dpre, Tensor* dbias) {
  Scope s(*this, "gemm_dgelu_bgrad", [&] {
    return Cost{gemm_shapes(a, ta, b, tb, dpre), a.dtype(), gemm_flops(a, ta, b, tb),
                bytes_of({&a, &b, &pre, &dpre, dbias, dbias})};
  });
  inner_->gemm_dgelu_bgrad(a, ta, b, tb, pre, dpre, dbias);
}
void ProfilingBackend::gemm_batched(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c,
                                    float alpha, float beta) {
  Scope s(*this, "gemm_batched", [&] {
    // Each of the batch's matrices: a [batch, rows, cols] and b likewise.
    double flops = 0.0;
    if (a.rank() == 3 && b.rank() == 3) {
      const double m = double(ta ? a.dim(2) : a.dim(1)), k = double(ta ? a.dim(1) : a.dim(2));
      const double n = double(tb ? b.dim(1) : b.dim(2));
      flops = 2.0 * double(a.dim(0)) * m * n * k;
    }
    return Cost{gemm_shapes(a, ta, b, tb, c), a.dtype(), flops,
                bytes_of({&a, &b, &c}) + (beta != 0.0f ? double(c.bytes()) : 0.0)};
  });
  inner_->gemm_batched(a, ta, b, tb, c, alpha, beta);
}

// --- elementwise -----------------------------------------------------------------------------

void ProfilingBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  Scope s(*this, "add", [&] { return Cost{one(out), out.dtype(), 0, bytes_of({&a, &b, &out})}; });
  inner_->add(a, b, out);
}
void ProfilingBackend::axpy(float alpha, const Tensor& x, Tensor& y) {
  Scope s(*this, "axpy", [&] { return Cost{one(y), y.dtype(), 0, bytes_of({&x, &y, &y})}; });
  inner_->axpy(alpha, x, y);
}
void ProfilingBackend::scale(Tensor& x, float alpha) {
  Scope s(*this, "scale", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &x})}; });
  inner_->scale(x, alpha);
}
void ProfilingBackend::bias_add(Tensor& x, const Tensor& bias) {
  Scope s(*this, "bias_add", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &x, &bias})}; });
  inner_->bias_add(x, bias);
}
void ProfilingBackend::bias_grad(const Tensor& dy, Tensor& dbias) {
  Scope s(*this, "bias_grad", [&] {
    return Cost{one(dy), dy.dtype(), 0, bytes_of({&dy, &dbias, &dbias})};
  });
  inner_->bias_grad(dy, dbias);
}

// --- activations -----------------------------------------------------------------------------

void ProfilingBackend::gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  Scope s(*this, "gelu_forward", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &y})}; });
  inner_->gelu_forward(x, y, tanh_approx);
}
void ProfilingBackend::gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx,
                                     bool tanh_approx) {
  Scope s(*this, "gelu_backward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&dy, &x, &dx})};
  });
  inner_->gelu_backward(dy, x, dx, tanh_approx);
}
void ProfilingBackend::swiglu_forward(const Tensor& x, Tensor& y) {
  Scope s(*this, "swiglu_forward", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &y})}; });
  inner_->swiglu_forward(x, y);
}
void ProfilingBackend::swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  Scope s(*this, "swiglu_backward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&dy, &x, &dx})};
  });
  inner_->swiglu_backward(dy, x, dx);
}
void ProfilingBackend::geglu_forward(const Tensor& x, Tensor& y) {
  Scope s(*this, "geglu_forward", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &y})}; });
  inner_->geglu_forward(x, y);
}
void ProfilingBackend::geglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  Scope s(*this, "geglu_backward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&dy, &x, &dx})};
  });
  inner_->geglu_backward(dy, x, dx);
}

// --- dropout ---------------------------------------------------------------------------------

void ProfilingBackend::dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) {
  Scope s(*this, "dropout_forward", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x, &y})}; });
  inner_->dropout_forward(x, y, p, key);
}
void ProfilingBackend::dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) {
  Scope s(*this, "dropout_backward", [&] {
    return Cost{one(dy), dy.dtype(), 0, bytes_of({&dy, &dx})};
  });
  inner_->dropout_backward(dy, dx, p, key);
}
void ProfilingBackend::dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                                   RngKey key) {
  Scope s(*this, "dropout_add", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&x, &residual, &out})};
  });
  inner_->dropout_add(x, residual, out, p, key);
}
void ProfilingBackend::bias_dropout_add(Tensor& x, const Tensor& bias, const Tensor& residual,
                                        Tensor& out, float p, RngKey key) {
  Scope s(*this, "bias_dropout_add", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&x, &bias, &residual, &out})};
  });
  inner_->bias_dropout_add(x, bias, residual, out, p, key);
}

// --- normalisation ---------------------------------------------------------------------------

void ProfilingBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  Scope s(*this, "layer_norm_forward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&x, &gamma, &beta, &y, &mean, &rstd})};
  });
  inner_->layer_norm_forward(x, gamma, beta, eps, y, mean, rstd);
}
void ProfilingBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                           const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                           Tensor& dgamma, Tensor& dbeta) {
  Scope s(*this, "layer_norm_backward", [&] {
    return Cost{one(x), x.dtype(), 0,
                bytes_of({&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dgamma, &dbeta, &dbeta})};
  });
  inner_->layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
}
void ProfilingBackend::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                                        Tensor& rstd) {
  Scope s(*this, "rms_norm_forward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&x, &gamma, &y, &rstd})};
  });
  inner_->rms_norm_forward(x, gamma, eps, y, rstd);
}
void ProfilingBackend::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                         const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  Scope s(*this, "rms_norm_backward", [&] {
    return Cost{one(x), x.dtype(), 0, bytes_of({&dy, &x, &gamma, &rstd, &dx, &dgamma, &dgamma})};
  });
  inner_->rms_norm_backward(dy, x, gamma, rstd, dx, dgamma);
}
void ProfilingBackend::qk_norm_forward(const Tensor& qkv, const AttentionShape& shape,
                                       const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                                       Tensor& out, Tensor& rstd) {
  Scope s(*this, "qk_norm_forward", [&] {
    return Cost{one(qkv), qkv.dtype(), 0, bytes_of({&qkv, &q_gamma, &k_gamma, &out, &rstd})};
  });
  inner_->qk_norm_forward(qkv, shape, q_gamma, k_gamma, eps, out, rstd);
}
void ProfilingBackend::qk_norm_backward(const Tensor& dout, const Tensor& qkv,
                                        const AttentionShape& shape, const Tensor& q_gamma,
                                        const Tensor& k_gamma, const Tensor& rstd, Tensor& dqkv,
                                        Tensor& dq_gamma, Tensor& dk_gamma) {
  Scope s(*this, "qk_norm_backward", [&] {
    return Cost{one(qkv), qkv.dtype(), 0,
                bytes_of({&dout, &qkv, &q_gamma, &k_gamma, &rstd, &dqkv, &dq_gamma, &dq_gamma,
                          &dk_gamma, &dk_gamma})};
  });
  inner_->qk_norm_backward(dout, qkv, shape, q_gamma, k_gamma, rstd, dqkv, dq_gamma, dk_gamma);
}

// --- embeddings ------------------------------------------------------------------------------

void ProfilingBackend::embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out,
                                         int64_t row_offset, bool accumulate) {
  // The rows gathered, not the whole table, are what moves.
  Scope s(*this, "embedding_forward", [&] {
    return Cost{fmt::format("{} rows of {}", ids.numel(), one(table)), table.dtype(), 0,
                bytes_of({&ids, &out, &out}) + (accumulate ? double(out.bytes()) : 0.0)};
  });
  inner_->embedding_forward(ids, table, out, row_offset, accumulate);
}
void ProfilingBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable,
                                          int64_t row_offset) {
  Scope s(*this, "embedding_backward", [&] {
    return Cost{fmt::format("{} rows of {}", ids.numel(), one(dtable)), dout.dtype(), 0,
                bytes_of({&ids, &dout, &dout, &dout})};
  });
  inner_->embedding_backward(ids, dout, dtable, row_offset);
}

// --- attention -------------------------------------------------------------------------------

void ProfilingBackend::rotary(Tensor& qkv, const AttentionShape& shape,
                              const RotaryOptions& options, bool inverse) {
  Scope s(*this, inverse ? "rotary_inverse" : "rotary", [&] {
    return Cost{one(qkv), qkv.dtype(), 0, bytes_of({&qkv, &qkv})};
  });
  inner_->rotary(qkv, shape, options, inverse);
}
void ProfilingBackend::attention_forward(const Tensor& qkv, const AttentionShape& shape,
                                         const AttentionOptions& options, Tensor& out,
                                         Tensor& lse) {
  Scope s(*this, "attention_forward", [&] {
    return Cost{attention_shapes(shape, options.causal, qkv.dtype()), qkv.dtype(),
                attention_flops(shape, options.causal), bytes_of({&qkv, &out, &lse})};
  });
  inner_->attention_forward(qkv, shape, options, out, lse);
}
void ProfilingBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                                          const Tensor& lse, const AttentionShape& shape,
                                          const AttentionOptions& options, Tensor& dqkv) {
  Scope s(*this, "attention_backward", [&] {
    return Cost{attention_shapes(shape, options.causal, qkv.dtype()), qkv.dtype(),
                kAttentionBackwardFactor * attention_flops(shape, options.causal),
                bytes_of({&qkv, &out, &dout, &lse, &dqkv})};
  });
  inner_->attention_backward(qkv, out, dout, lse, shape, options, dqkv);
}
void ProfilingBackend::attention_cached(const Tensor& qkv, const AttentionShape& shape,
                                        int64_t start, float scale, Tensor& k_cache,
                                        Tensor& v_cache, Tensor& out) {
  // Each new query attends over the cache up to its own position.
  const double keys = double(start) + double(shape.seq + 1) / 2.0;
  const double flops = 4.0 * double(shape.batch) * double(shape.heads) * double(shape.seq) * keys *
                       double(shape.head_dim);
  const double cached = 2.0 * double(shape.batch) * double(shape.groups) *
                        (double(start) + double(shape.seq)) * double(shape.head_dim) *
                        double(size_of(k_cache.dtype()));
  Scope s(*this, "attention_cached", [&] {
    return Cost{fmt::format("{} from {}", attention_shapes(shape, true, qkv.dtype()), start),
                qkv.dtype(), flops, bytes_of({&qkv, &out}) + cached};
  });
  inner_->attention_cached(qkv, shape, start, scale, k_cache, v_cache, out);
}
void ProfilingBackend::attention_paged(const Tensor& qkv, const AttentionShape& shape,
                                       const Tensor& positions, const Tensor& block_tables,
                                       float scale, Tensor& k_pool, Tensor& v_pool, Tensor& out) {
  Scope s(*this, "attention_paged", [&] {
    // The positions live on the device: the cost is given per row, not per key.
    return Cost{fmt::format("{} rows, paged", shape.batch), qkv.dtype(),
                4.0 * double(shape.batch) * double(shape.heads) * double(shape.head_dim),
                bytes_of({&qkv, &out, &positions, &block_tables})};
  });
  inner_->attention_paged(qkv, shape, positions, block_tables, scale, k_pool, v_pool, out);
}
void ProfilingBackend::cross_attention_forward(const Tensor& q, const Tensor& kv,
                                               const CrossAttentionShape& shape,
                                               const AttentionOptions& options, Tensor& out,
                                               Tensor& lse) {
  Scope s(*this, "cross_attention_forward", [&] {
    return Cost{cross_shapes(shape, options.causal, q.dtype()), q.dtype(),
                cross_attention_flops(shape, options.causal),
                bytes_of({&q, shape.packed ? nullptr : &kv, &out, &lse, options.bias})};
  });
  inner_->cross_attention_forward(q, kv, shape, options, out, lse);
}
void ProfilingBackend::cross_attention_backward(const Tensor& q, const Tensor& kv,
                                                const Tensor& out, const Tensor& dout,
                                                const Tensor& lse, const CrossAttentionShape& shape,
                                                const AttentionOptions& options, Tensor& dq,
                                                Tensor& dkv, Tensor* dbias) {
  Scope s(*this, "cross_attention_backward", [&] {
    return Cost{cross_shapes(shape, options.causal, q.dtype()), q.dtype(),
                kAttentionBackwardFactor * cross_attention_flops(shape, options.causal),
                bytes_of({&q, shape.packed ? nullptr : &kv, &out, &dout, &lse, &dq,
                          shape.packed ? nullptr : &dkv, dbias, dbias})};
  });
  inner_->cross_attention_backward(q, kv, out, dout, lse, shape, options, dq, dkv, dbias);
}

// --- loss ------------------------------------------------------------------------------------

void ProfilingBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                             Tensor& loss, Tensor& lse, VocabShard shard) {
  Scope s(*this, "cross_entropy_forward", [&] {
    return Cost{one(logits), logits.dtype(), 0, bytes_of({&logits, &targets, &loss, &lse})};
  });
  inner_->cross_entropy_forward(logits, targets, loss, lse, shard);
}
void ProfilingBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                              const Tensor& lse, const Tensor& dloss,
                                              Tensor& dlogits, VocabShard shard) {
  Scope s(*this, "cross_entropy_backward", [&] {
    return Cost{one(logits), logits.dtype(), 0,
                bytes_of({&logits, &targets, &lse, &dloss, &dlogits})};
  });
  inner_->cross_entropy_backward(logits, targets, lse, dloss, dlogits, shard);
}

// --- reductions ------------------------------------------------------------------------------

double ProfilingBackend::sum(const Tensor& x) {
  Scope s(*this, "sum", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  return inner_->sum(x);
}
double ProfilingBackend::dot(const Tensor& a, const Tensor& b) {
  Scope s(*this, "dot", [&] { return Cost{one(a), a.dtype(), 0, bytes_of({&a, &b})}; });
  return inner_->dot(a, b);
}
double ProfilingBackend::sum_squares(const Tensor& x) {
  Scope s(*this, "sum_squares", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  return inner_->sum_squares(x);
}
bool ProfilingBackend::all_finite(const Tensor& x) {
  Scope s(*this, "all_finite", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  return inner_->all_finite(x);
}
double ProfilingBackend::sum_squares_many(std::span<const Tensor> xs) {
  Scope s(*this, "sum_squares_many", [&] {
    Cost cost{.dtype = xs.empty() ? DType::F32 : xs.front().dtype()};
    int64_t elements = 0;
    for (const Tensor& x : xs) {
      cost.bytes += double(x.bytes());
      elements += x.numel();
    }
    cost.shapes = fmt::format("{} tensors, {} elements", xs.size(), elements);
    return cost;
  });
  return inner_->sum_squares_many(xs);
}

// --- initialisation and optimizers -----------------------------------------------------------

void ProfilingBackend::normal(Tensor& x, float mean, float std, RngKey key) {
  Scope s(*this, "normal", [&] { return Cost{one(x), x.dtype(), 0, bytes_of({&x})}; });
  inner_->normal(x, mean, std, key);
}
void ProfilingBackend::adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                                    const AdamWStep& step) {
  Scope s(*this, "adamw_update", [&] {
    return Cost{one(master), master.dtype(), 0,
                bytes_of({&master, &master, &grad, &m, &m, &v, &v})};
  });
  inner_->adamw_update(master, grad, m, v, step);
}
void ProfilingBackend::sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum,
                                  const SgdStep& step) {
  Scope s(*this, "sgd_update", [&] {
    return Cost{one(master), master.dtype(), 0,
                bytes_of({&master, &master, &grad, &momentum, &momentum})};
  });
  inner_->sgd_update(master, grad, momentum, step);
}
void ProfilingBackend::adamw_update_many(std::span<const AdamWParam> params,
                                         const AdamWStep& step) {
  Scope s(*this, "adamw_update_many", [&] {
    Cost cost;
    int64_t elements = 0;
    for (const AdamWParam& p : params) {
      cost.bytes += bytes_of({&p.master, &p.master, &p.grad, &p.m, &p.m, &p.v, &p.v, &p.value});
      elements += p.master.numel();
    }
    cost.shapes = fmt::format("{} tensors, {} elements", params.size(), elements);
    return cost;
  });
  inner_->adamw_update_many(params, step);
}

}  // namespace megatron::tensor
