// CpuBackend: layer norm and RMS norm over the last dimension, forward and backward.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"

namespace megatron::tensor {
namespace {

using cpu::Floats;

// Row sums are accumulated in this many independent f32 lanes and the lanes added in a fixed
// tree: the compiler may not reorder a single float accumulator into vector lanes itself.
constexpr int kLanes = 16;

inline float reduce_lanes(float* acc) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

inline float row_sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += x[i];
  return reduce_lanes(acc);
}

// sum (x - center)^2
inline float row_sum_squares(const float* x, float center, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[i + l] - center;
      acc[l] += d * d;
    }
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += (x[i] - center) * (x[i] - center);
  return reduce_lanes(acc);
}

inline float row_dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return reduce_lanes(acc);
}

struct Rows {
  int64_t n = 0;
  int64_t c = 0;
};

// x viewed as [n, c] over its last dimension, with a parameter of c elements.
Rows norm_rows(const Tensor& x, const Tensor& gamma, const char* op) {
  cpu::require(x.rank() >= 1, op, "expected at least one dimension, got a scalar");
  const int64_t c = x.dim(-1);
  cpu::require(gamma.numel() == c, op,
               "gamma " + to_string(gamma.shape()) + " for rows of " + to_string(x.shape()));
  return {c == 0 ? 0 : x.numel() / c, c};
}

// A per-row statistic (mean, rstd): f32 with one element per row.
float* row_stat(const Tensor& t, int64_t n, const char* op, const char* what) {
  cpu::require(t.dtype() == DType::F32 && t.numel() == n, op,
               std::string(what) + " must be f32 with " + std::to_string(n) + " elements, got " +
                   std::string(name(t.dtype())) + " " + to_string(t.shape()));
  return t.data<float>();
}

// A parameter gradient: f32 with c elements, accumulated into.
float* param_grad(const Tensor& t, int64_t c, const char* op, const char* what) {
  cpu::require(t.dtype() == DType::F32 && t.numel() == c, op,
               std::string(what) + " must be f32 with " + std::to_string(c) + " elements, got " +
                   std::string(name(t.dtype())) + " " + to_string(t.shape()));
  return t.data<float>();
}

std::vector<float> as_f32(const Tensor& t, const char* op) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const float* values = cpu::load_f32(cpu::floats(t, op), 0, t.numel(), out.data());
  if (values != out.data()) std::copy(values, values + t.numel(), out.data());
  return out;
}

// One row of RMS norm's backward (a row of rms_norm_backward, a head of qk_norm_backward):
// d = rs (g - xhat mean(g xhat)) with g = dy gamma and xhat = x rs; dy xhat joins `partial`.
// xhat and gg are the caller's scratch rows.
void rms_row_backward(const float* xs, const float* dy, const float* gamma, float rs, int64_t c,
                      float* xhat, float* gg, float* partial, float* d) {
  for (int64_t j = 0; j < c; ++j) {
    const float xh = xs[j] * rs;
    xhat[j] = xh;
    gg[j] = dy[j] * gamma[j];
    partial[j] += dy[j] * xh;
  }
  const float mean_gx = row_dot(gg, xhat, c) * (1.0f / static_cast<float>(c));
  for (int64_t j = 0; j < c; ++j) d[j] = rs * (gg[j] - xhat[j] * mean_gx);
}

// Per-thread f32 staging for one row of each of `count` tensors.
struct RowBuffers {
  RowBuffers(int64_t c, int count) : storage(static_cast<size_t>(c * count)), c(c) {}
  float* operator[](int i) { return storage.data() + i * c; }
  std::vector<float> storage;
  int64_t c;
};

}  // namespace

void CpuBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "layer_norm_forward";
  const Rows r = norm_rows(x, gamma, op);
  cpu::require(beta.numel() == r.c, op,
               "beta " + to_string(beta.shape()) + " for " + to_string(x.shape()));
  cpu::require_numel(x, y, op);
  float* mean_out = row_stat(mean, r.n, op, "mean");
  float* rstd_out = row_stat(rstd, r.n, op, "rstd");
  const Floats fx = cpu::floats(x, op), fy = cpu::floats(y, op);
  const std::vector<float> g = as_f32(gamma, op), b = as_f32(beta, op);
  const int64_t c = r.c;
#pragma omp parallel if (x.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 2);
#pragma omp for schedule(static)
    for (int64_t row = 0; row < r.n; ++row) {
      const float* xs = cpu::load_f32(fx, row * c, c, buffers[0]);
      float* ys = cpu::f32_target(fy, row * c, buffers[1]);
      const float mu = row_sum(xs, c) / static_cast<float>(c);
      const float var = row_sum_squares(xs, mu, c) / static_cast<float>(c);
      const float rs = 1.0f / std::sqrt(var + eps);
      for (int64_t j = 0; j < c; ++j) ys[j] = (xs[j] - mu) * rs * g[j] + b[j];
      cpu::store_f32(fy, row * c, c, ys);
      mean_out[row] = mu;
      rstd_out[row] = rs;
    }
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy gamma, xhat = (x - mean) rstd;
// dgamma += sum over rows of dy xhat, dbeta += sum of dy, by fixed row blocks.
void CpuBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                     const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                     Tensor& dgamma, Tensor& dbeta) {
  const char* op = "layer_norm_backward";
  const Rows r = norm_rows(x, gamma, op);
  cpu::require_numel(x, dy, op);
  cpu::require_numel(x, dx, op);
  const float* mean_in = row_stat(mean, r.n, op, "mean");
  const float* rstd_in = row_stat(rstd, r.n, op, "rstd");
  float* dgamma_out = param_grad(dgamma, r.c, op, "dgamma");
  float* dbeta_out = param_grad(dbeta, r.c, op, "dbeta");
  const Floats fdy = cpu::floats(dy, op), fx = cpu::floats(x, op), fdx = cpu::floats(dx, op);
  const std::vector<float> gamma_values = as_f32(gamma, op);
  const float* gam = gamma_values.data();
  const int64_t c = r.c;
  const cpu::RowBlocks blocks = cpu::row_blocks(r.n);
  if (blocks.count == 0 || c == 0) return;
  // Block b's partial dgamma, then (after all blocks) the partial dbetas.
  float* partial = cpu::thread_scratch(static_cast<size_t>(2 * blocks.count * c));
  float* partial_beta = partial + blocks.count * c;
  const float inv_c = 1.0f / static_cast<float>(c);
#pragma omp parallel if (x.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 5);
    float* xhat = buffers[3];
    float* gg = buffers[4];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks.count; ++b) {
      float* pg = partial + b * c;
      float* pb = partial_beta + b * c;
      std::fill(pg, pg + c, 0.0f);
      std::fill(pb, pb + c, 0.0f);
      const int64_t end = std::min(r.n, (b + 1) * blocks.rows);
      for (int64_t row = b * blocks.rows; row < end; ++row) {
        const float* xs = cpu::load_f32(fx, row * c, c, buffers[0]);
        const float* g = cpu::load_f32(fdy, row * c, c, buffers[1]);
        const float mu = mean_in[row], rs = rstd_in[row];
        // Two loops, not one: one loop over all seven arrays needs more run-time alias checks
        // than the compiler will emit, and then does not vectorise at all.
        for (int64_t j = 0; j < c; ++j) {
          xhat[j] = (xs[j] - mu) * rs;
          gg[j] = g[j] * gam[j];
        }
        for (int64_t j = 0; j < c; ++j) {
          pg[j] += g[j] * xhat[j];
          pb[j] += g[j];
        }
        const float mean_g = row_sum(gg, c) * inv_c;
        const float mean_gx = row_dot(gg, xhat, c) * inv_c;
        float* d = cpu::f32_target(fdx, row * c, buffers[2]);
        for (int64_t j = 0; j < c; ++j) d[j] = rs * (gg[j] - mean_g - xhat[j] * mean_gx);
        cpu::store_f32(fdx, row * c, c, d);
      }
    }
  }
  cpu::add_partials(partial, blocks.count, c, dgamma_out);
  cpu::add_partials(partial_beta, blocks.count, c, dbeta_out);
}

void CpuBackend::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                                  Tensor& rstd) {
  const char* op = "rms_norm_forward";
  const Rows r = norm_rows(x, gamma, op);
  cpu::require_numel(x, y, op);
  float* rstd_out = row_stat(rstd, r.n, op, "rstd");
  const Floats fx = cpu::floats(x, op), fy = cpu::floats(y, op);
  const std::vector<float> g = as_f32(gamma, op);
  const int64_t c = r.c;
#pragma omp parallel if (x.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 2);
#pragma omp for schedule(static)
    for (int64_t row = 0; row < r.n; ++row) {
      const float* xs = cpu::load_f32(fx, row * c, c, buffers[0]);
      float* ys = cpu::f32_target(fy, row * c, buffers[1]);
      const float rs = 1.0f / std::sqrt(row_sum_squares(xs, 0.0f, c) / static_cast<float>(c) + eps);
      for (int64_t j = 0; j < c; ++j) ys[j] = xs[j] * rs * g[j];
      cpu::store_f32(fy, row * c, c, ys);
      rstd_out[row] = rs;
    }
  }
}

// dx = rstd (g - xhat mean(g xhat)) with g = dy gamma, xhat = x rstd; dgamma += sum dy xhat.
void CpuBackend::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                   const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  const char* op = "rms_norm_backward";
  const Rows r = norm_rows(x, gamma, op);
  cpu::require_numel(x, dy, op);
  cpu::require_numel(x, dx, op);
  const float* rstd_in = row_stat(rstd, r.n, op, "rstd");
  float* dgamma_out = param_grad(dgamma, r.c, op, "dgamma");
  const Floats fdy = cpu::floats(dy, op), fx = cpu::floats(x, op), fdx = cpu::floats(dx, op);
  const std::vector<float> gamma_values = as_f32(gamma, op);
  const float* gam = gamma_values.data();
  const int64_t c = r.c;
  const cpu::RowBlocks blocks = cpu::row_blocks(r.n);
  if (blocks.count == 0 || c == 0) return;
  float* partial = cpu::thread_scratch(static_cast<size_t>(blocks.count * c));
#pragma omp parallel if (x.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 5);
    float* xhat = buffers[3];
    float* gg = buffers[4];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks.count; ++b) {
      float* pg = partial + b * c;
      std::fill(pg, pg + c, 0.0f);
      const int64_t end = std::min(r.n, (b + 1) * blocks.rows);
      for (int64_t row = b * blocks.rows; row < end; ++row) {
        const float* xs = cpu::load_f32(fx, row * c, c, buffers[0]);
        const float* g = cpu::load_f32(fdy, row * c, c, buffers[1]);
        float* d = cpu::f32_target(fdx, row * c, buffers[2]);
        rms_row_backward(xs, g, gam, rstd_in[row], c, xhat, gg, pg, d);
        cpu::store_f32(fdx, row * c, c, d);
      }
    }
  }
  cpu::add_partials(partial, blocks.count, c, dgamma_out);
}


namespace {

// Where the query and key heads sit in a fused qkv row: per group, its query heads, its key head,
// then its value head (AttentionShape's layout). Slot s of a row is head_dim channels at s *
// head_dim; its statistic is the row's count of query and key heads before it.
struct QkHeads {
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t per_group = 0;  // query heads per group
  int64_t slots = 0;      // heads + 2 * groups
  int64_t normed = 0;     // heads + groups
  bool is_value(int64_t slot) const { return slot % (per_group + 2) == per_group + 1; }
  bool is_key(int64_t slot) const { return slot % (per_group + 2) == per_group; }
  int64_t stat(int64_t slot) const { return slot - slot / (per_group + 2); }
};

QkHeads qk_heads(const Tensor& qkv, const AttentionShape& shape, const Tensor& q_gamma,
                 const Tensor& k_gamma, const char* op) {
  cpu::require(shape.head_dim > 0 && shape.groups > 0 && shape.heads > 0 &&
                   shape.heads % shape.groups == 0,
               op, "bad shape (heads must be a positive multiple of groups)");
  const int64_t width = shape.qkv_width();
  cpu::require(qkv.numel() % width == 0, op,
               "qkv " + to_string(qkv.shape()) + " is not rows of " + std::to_string(width));
  cpu::require(q_gamma.numel() == shape.head_dim && k_gamma.numel() == shape.head_dim, op,
               "q_gamma " + to_string(q_gamma.shape()) + " and k_gamma " +
                   to_string(k_gamma.shape()) + " for heads of " + std::to_string(shape.head_dim));
  return {.rows = qkv.numel() / width,
          .dim = shape.head_dim,
          .per_group = shape.heads / shape.groups,
          .slots = shape.heads + 2 * shape.groups,
          .normed = shape.heads + shape.groups};
}

}  // namespace

void CpuBackend::qk_norm_forward(const Tensor& qkv, const AttentionShape& shape,
                                 const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                                 Tensor& out, Tensor& rstd) {
  const char* op = "qk_norm_forward";
  const QkHeads h = qk_heads(qkv, shape, q_gamma, k_gamma, op);
  cpu::require_numel(qkv, out, op);
  float* rstd_out = row_stat(rstd, h.rows * h.normed, op, "rstd");
  const Floats fx = cpu::floats(qkv, op), fy = cpu::floats(out, op);
  const std::vector<float> gq = as_f32(q_gamma, op), gk = as_f32(k_gamma, op);
  const int64_t c = h.dim;
  const int64_t n = h.rows * h.slots;
#pragma omp parallel if (qkv.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 2);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = i / h.slots, slot = i % h.slots;
      const float* xs = cpu::load_f32(fx, i * c, c, buffers[0]);
      float* ys = cpu::f32_target(fy, i * c, buffers[1]);
      if (h.is_value(slot)) {
        std::copy(xs, xs + c, ys);
      } else {
        const float* g = h.is_key(slot) ? gk.data() : gq.data();
        const float rs = 1.0f / std::sqrt(row_sum_squares(xs, 0.0f, c) / static_cast<float>(c) + eps);
        for (int64_t j = 0; j < c; ++j) ys[j] = xs[j] * rs * g[j];
        rstd_out[row * h.normed + h.stat(slot)] = rs;
      }
      cpu::store_f32(fy, i * c, c, ys);
    }
  }
}

// Each head as rms_norm_backward's row; the query heads' dy xhat sum into the first head_dim
// columns of a block's partial sums, the key heads' into the second.
void CpuBackend::qk_norm_backward(const Tensor& dout, const Tensor& qkv, const AttentionShape& shape,
                                  const Tensor& q_gamma, const Tensor& k_gamma, const Tensor& rstd,
                                  Tensor& dqkv, Tensor& dq_gamma, Tensor& dk_gamma) {
  const char* op = "qk_norm_backward";
  const QkHeads h = qk_heads(qkv, shape, q_gamma, k_gamma, op);
  cpu::require_numel(qkv, dout, op);
  cpu::require_numel(qkv, dqkv, op);
  const int64_t c = h.dim;
  const float* rstd_in = row_stat(rstd, h.rows * h.normed, op, "rstd");
  float* dq_out = param_grad(dq_gamma, c, op, "dq_gamma");
  float* dk_out = param_grad(dk_gamma, c, op, "dk_gamma");
  const Floats fdy = cpu::floats(dout, op), fx = cpu::floats(qkv, op), fdx = cpu::floats(dqkv, op);
  const std::vector<float> gq = as_f32(q_gamma, op), gk = as_f32(k_gamma, op);
  const int64_t n = h.rows * h.slots;
  const cpu::RowBlocks blocks = cpu::row_blocks(n);
  if (blocks.count == 0) return;
  float* partial = cpu::thread_scratch(static_cast<size_t>(blocks.count * 2 * c));
#pragma omp parallel if (qkv.numel() >= cpu::kParallelMin)
  {
    RowBuffers buffers(c, 5);
    float* xhat = buffers[3];
    float* gg = buffers[4];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks.count; ++b) {
      float* pb = partial + b * 2 * c;
      std::fill(pb, pb + 2 * c, 0.0f);
      const int64_t end = std::min(n, (b + 1) * blocks.rows);
      for (int64_t i = b * blocks.rows; i < end; ++i) {
        const int64_t row = i / h.slots, slot = i % h.slots;
        const float* g = cpu::load_f32(fdy, i * c, c, buffers[1]);
        float* d = cpu::f32_target(fdx, i * c, buffers[2]);
        if (h.is_value(slot)) {
          std::copy(g, g + c, d);
          cpu::store_f32(fdx, i * c, c, d);
          continue;
        }
        const bool key = h.is_key(slot);
        const float* xs = cpu::load_f32(fx, i * c, c, buffers[0]);
        rms_row_backward(xs, g, key ? gk.data() : gq.data(), rstd_in[row * h.normed + h.stat(slot)],
                         c, xhat, gg, pb + (key ? c : 0), d);
        cpu::store_f32(fdx, i * c, c, d);
      }
    }
  }
  // Across blocks in block order: the same sums on any thread count.
  for (int64_t j = 0; j < 2 * c; ++j) {
    float total = partial[j];
    for (int64_t b = 1; b < blocks.count; ++b) total += partial[b * 2 * c + j];
    (j < c ? dq_out[j] : dk_out[j - c]) += total;
  }
}

}  // namespace megatron::tensor
