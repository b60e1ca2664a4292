// CpuBackend cross-attention (T5's decoder over the encoder output): queries of one tensor over
// the keys and values of another, each sequence with its own length.
//
// Encoder outputs are short (T5: 512 keys), so a unit of work materialises one head's whole
// q_seq x kv_seq score matrix in f32 scratch and multiplies with OpenBLAS, rather than streaming
// key blocks as the flash kernel does. Forward units are (batch, head); backward units are
// (batch, key/value group), looping over the group's query heads in order, so that a group's key
// and value gradients are summed by one thread in a fixed order. Inside the parallel region
// OpenBLAS runs on the calling thread: results are bitwise the same on any number of threads.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"
#include "tensor/cpu_fast_exp.hpp"
#include "tensor/cpu_uniforms.hpp"

namespace megatron::tensor {
namespace {

// Waking the team costs tens of microseconds: below about 16 M flops a call runs on the calling
// thread (as the flash kernel decides).
constexpr double kParallelFlops = 1 << 24;

struct CrossLayout {
  CrossAttentionShape s;
  int64_t per_group;  // query heads per key/value group
  int64_t q_width;    // of a q (and out) row
  int64_t kv_width;   // of a kv row

  explicit CrossLayout(const CrossAttentionShape& shape)
      : s(shape),
        per_group(shape.heads / shape.groups),
        q_width(shape.q_width()),
        kv_width(shape.kv_width()) {}
};

void check_shape(const CrossAttentionShape& s, const char* op) {
  cpu::require(s.batch >= 0 && s.q_seq >= 0 && s.kv_seq > 0 && s.head_dim > 0 && s.groups > 0 &&
                   s.heads > 0 && s.heads % s.groups == 0,
               op,
               "bad shape (kv_seq and head_dim must be positive, heads a positive multiple of "
               "groups)");
}

void check_options(const CrossAttentionShape& s, const AttentionOptions& o, const char* op) {
  cpu::require(!o.causal, op, "cross-attention has no causal mask: options.causal must be false");
  cpu::require(o.dropout >= 0.0f && o.dropout < 1.0f, op, "dropout must be in [0, 1)");
  if (o.key_lengths.empty()) return;
  cpu::require(int64_t(o.key_lengths.size()) == s.batch, op,
               "key_lengths has " + std::to_string(o.key_lengths.size()) +
                   " entries for a batch of " + std::to_string(s.batch));
  for (const int64_t keys : o.key_lengths)
    cpu::require(
        keys >= 1 && keys <= s.kv_seq, op,
        "a key length of " + std::to_string(keys) + " is outside 1.." + std::to_string(s.kv_seq));
}

// x must be a CPU float tensor of `dtype` with `numel` elements.
cpu::Floats checked(const Tensor& x, const char* name, DType dtype, int64_t numel,
                    const std::string& expected, const char* op) {
  const cpu::Floats f = cpu::floats(x, op);
  cpu::require(x.dtype() == dtype, op,
               std::string(name) + " is " + std::string(tensor::name(x.dtype())) + ", not q's " +
                   std::string(tensor::name(dtype)));
  cpu::require(x.numel() == numel, op,
               std::string(name) + " " + to_string(x.shape()) + " is not " + expected);
  return f;
}

void check_lse(const Tensor& lse, const CrossAttentionShape& s, const char* op) {
  cpu::require(lse.device() == Device::Cpu && lse.dtype() == DType::F32 &&
                   lse.numel() == s.batch * s.heads * s.q_seq,
               op, "lse must be f32 [batch, heads, q_seq]");
}

int64_t keys_of(const AttentionOptions& o, const CrossAttentionShape& s, int64_t b) {
  return o.key_lengths.empty() ? s.kv_seq : o.key_lengths[size_t(b)];
}

// dst[t * dim + d] = x[row0 + t, column + d] for t < rows, d < dim, in f32.
void gather(cpu::Floats x, int64_t width, int64_t row0, int64_t column, int64_t rows, int64_t dim,
            float* dst) {
  for (int64_t t = 0; t < rows; ++t) {
    float* row = dst + t * dim;
    const float* src = cpu::load_f32(x, (row0 + t) * width + column, dim, row);
    if (src != row) std::memcpy(row, src, size_t(dim) * sizeof(float));
  }
}

// x[row0 + t, column + d] = src[t * dim + d], rounded to x's dtype.
void scatter(const float* src, int64_t rows, int64_t dim, cpu::Floats x, int64_t width,
             int64_t row0, int64_t column) {
  for (int64_t t = 0; t < rows; ++t) {
    cpu::store_f32(x, (row0 + t) * width + column, dim, src + t * dim);
  }
}

// The dropout multipliers (keep_scale or 0) of one head's probabilities, numbered as
// AttentionOptions says with q_seq rows of kv_seq columns.
struct CrossDropout {
  float p = 0.0f;
  float keep_scale = 1.0f;
  RngKey key;
  uint64_t head_base = 0;  // (b * total_heads + head_offset + h) * q_seq * kv_seq
  int64_t kv_seq = 0;

  CrossDropout(const AttentionOptions& o, const CrossAttentionShape& s, int64_t b, int64_t h)
      : p(o.dropout), keep_scale(1.0f / (1.0f - o.dropout)), key(o.rng), kv_seq(s.kv_seq) {
    const int64_t total = o.total_heads > 0 ? o.total_heads : s.heads;
    head_base = static_cast<uint64_t>((b * total + o.head_offset + h) * s.q_seq * s.kv_seq);
  }
  bool on() const { return p > 0.0f; }
  // factor[j] for the first n keys of query row i.
  void factors(int64_t i, int64_t n, float* factor) const {
    const uint64_t row = head_base + static_cast<uint64_t>(i * kv_seq);
    for (int64_t j0 = 0; j0 < n; j0 += cpu::kMaxUniforms) {
      cpu::block_uniforms(key, row + uint64_t(j0), std::min(cpu::kMaxUniforms, n - j0),
                          factor + j0);
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) factor[j] = factor[j] >= p ? keep_scale : 0.0f;
  }
};

// c [m, n] = alpha op(a) op(b) + beta c, f32 row-major with packed leading dimensions given.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda), b,
              int(ldb), beta, c, int(ldc));
}

// One thread's scratch: one head's queries and its group's keys and values, its scores.
struct Scratch {
  std::vector<float> q, k, v, o, s, dp, factor;
  Scratch(const CrossAttentionShape& shape, bool backward)
      : q(size_t(shape.q_seq * shape.head_dim)),
        k(size_t(shape.kv_seq * shape.head_dim)),
        v(size_t(shape.kv_seq * shape.head_dim)),
        o(size_t(shape.q_seq * shape.head_dim)),
        s(size_t(shape.q_seq * shape.kv_seq)),
        dp(backward ? size_t(shape.q_seq * shape.kv_seq) : 0),
        factor(size_t(shape.kv_seq)) {}
};

}  // namespace

void CpuBackend::cross_attention_forward(const Tensor& q, const Tensor& kv,
                                         const CrossAttentionShape& shape,
                                         const AttentionOptions& options, Tensor& out,
                                         Tensor& lse) {
  const char* op = "cross_attention_forward";
  check_shape(shape, op);
  check_options(shape, options, op);
  const CrossLayout l(shape);
  const int64_t q_numel = l.s.batch * l.s.q_seq * l.q_width;
  const cpu::Floats fq = cpu::floats(q, op);
  cpu::require(q.numel() == q_numel, op,
               "q " + to_string(q.shape()) + " is not [batch * q_seq, heads * head_dim]");
  const cpu::Floats fkv = checked(kv, "kv", q.dtype(), l.s.batch * l.s.kv_seq * l.kv_width,
                                  "[batch * kv_seq, 2 * groups * head_dim]", op);
  const cpu::Floats fout =
      checked(out, "out", q.dtype(), q_numel, "[batch * q_seq, heads * head_dim]", op);
  check_lse(lse, shape, op);
  if (q_numel == 0) return;
  float* lse_data = lse.data<float>();
  const int64_t d = l.s.head_dim, q_seq = l.s.q_seq, kv_seq = l.s.kv_seq;
  const int64_t units = l.s.batch * l.s.heads;
  const double flops = 4.0 * double(units) * double(q_seq) * double(kv_seq) * double(d);
#pragma omp parallel num_threads(threads_) if (units > 1 && flops >= kParallelFlops)
  {
    Scratch ws(shape, false);
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t b = unit / l.s.heads, h = unit % l.s.heads, g = h / l.per_group;
      const int64_t keys = keys_of(options, shape, b);
      gather(fq, l.q_width, b * q_seq, h * d, q_seq, d, ws.q.data());
      gather(fkv, l.kv_width, b * kv_seq, shape.key_column(g), keys, d, ws.k.data());
      gather(fkv, l.kv_width, b * kv_seq, shape.value_column(g), keys, d, ws.v.data());
      // Scores of the attended keys only: [q_seq, keys], rows kv_seq apart.
      sgemm(false, true, q_seq, keys, d, options.scale, ws.q.data(), d, ws.k.data(), d, 0.0f,
            ws.s.data(), kv_seq);
      const CrossDropout dropout(options, shape, b, h);
      float* lse_row = lse_data + unit * q_seq;
      for (int64_t i = 0; i < q_seq; ++i) {
        float* srow = ws.s.data() + i * kv_seq;
        const float max = cpu::max_of(srow, keys, -std::numeric_limits<float>::infinity());
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < keys; ++j) {
          srow[j] = cpu::fast_exp(srow[j] - max);
          sum += srow[j];
        }
        // The normaliser is of the undropped probabilities, as attention_forward's lse is.
        lse_row[i] = max + std::log(sum);
        const float inv = 1.0f / sum;
        if (dropout.on()) {
          dropout.factors(i, keys, ws.factor.data());
          const float* z = ws.factor.data();
#pragma omp simd
          for (int64_t j = 0; j < keys; ++j) srow[j] *= inv * z[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < keys; ++j) srow[j] *= inv;
        }
      }
      sgemm(false, false, q_seq, d, keys, 1.0f, ws.s.data(), kv_seq, ws.v.data(), d, 0.0f,
            ws.o.data(), d);
      scatter(ws.o.data(), q_seq, d, fout, l.q_width, b * q_seq, h * d);
    }
  }
}

void CpuBackend::cross_attention_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                          const Tensor& dout, const Tensor& lse,
                                          const CrossAttentionShape& shape,
                                          const AttentionOptions& options, Tensor& dq,
                                          Tensor& dkv) {
  const char* op = "cross_attention_backward";
  check_shape(shape, op);
  check_options(shape, options, op);
  const CrossLayout l(shape);
  const int64_t q_numel = l.s.batch * l.s.q_seq * l.q_width;
  const int64_t kv_numel = l.s.batch * l.s.kv_seq * l.kv_width;
  const cpu::Floats fq = cpu::floats(q, op);
  cpu::require(q.numel() == q_numel, op,
               "q " + to_string(q.shape()) + " is not [batch * q_seq, heads * head_dim]");
  const std::string q_rows = "[batch * q_seq, heads * head_dim]";
  const std::string kv_rows = "[batch * kv_seq, 2 * groups * head_dim]";
  const cpu::Floats fkv = checked(kv, "kv", q.dtype(), kv_numel, kv_rows, op);
  const cpu::Floats fout = checked(out, "out", q.dtype(), q_numel, q_rows, op);
  const cpu::Floats fdout = checked(dout, "dout", q.dtype(), q_numel, q_rows, op);
  const cpu::Floats fdq = checked(dq, "dq", q.dtype(), q_numel, q_rows, op);
  const cpu::Floats fdkv = checked(dkv, "dkv", q.dtype(), kv_numel, kv_rows, op);
  check_lse(lse, shape, op);
  if (kv_numel == 0) return;
  if (q_numel == 0) {  // no queries: nothing reads the keys and values
    fill(dkv, 0.0);
    return;
  }
  const float* lse_data = lse.data<float>();
  const int64_t d = l.s.head_dim, q_seq = l.s.q_seq, kv_seq = l.s.kv_seq;
  const float scale = options.scale;
  const int64_t units = l.s.batch * l.s.groups;
  const double flops =
      10.0 * double(l.s.batch * l.s.heads) * double(q_seq) * double(kv_seq) * double(d);
#pragma omp parallel num_threads(threads_) if (units > 1 && flops >= kParallelFlops)
  {
    Scratch ws(shape, true);
    std::vector<float> dk(static_cast<size_t>(kv_seq * d)), dv(static_cast<size_t>(kv_seq * d)),
        dout_h(static_cast<size_t>(q_seq * d)), delta(static_cast<size_t>(q_seq));
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t b = unit / l.s.groups, g = unit % l.s.groups;
      const int64_t keys = keys_of(options, shape, b);
      gather(fkv, l.kv_width, b * kv_seq, shape.key_column(g), keys, d, ws.k.data());
      gather(fkv, l.kv_width, b * kv_seq, shape.value_column(g), keys, d, ws.v.data());
      // Masked keys get no gradient: their rows stay zero.
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (int64_t h = g * l.per_group; h < (g + 1) * l.per_group; ++h) {
        gather(fq, l.q_width, b * q_seq, h * d, q_seq, d, ws.q.data());
        gather(fout, l.q_width, b * q_seq, h * d, q_seq, d, ws.o.data());
        gather(fdout, l.q_width, b * q_seq, h * d, q_seq, d, dout_h.data());
        // delta_i = rowsum(dO_i * O_i) = rowsum(P~_i * dP~_i), the softmax's backward term.
        for (int64_t i = 0; i < q_seq; ++i) {
          const float* o_row = ws.o.data() + i * d;
          const float* g_row = dout_h.data() + i * d;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < d; ++c) sum += o_row[c] * g_row[c];
          delta[size_t(i)] = sum;
        }
        sgemm(false, true, q_seq, keys, d, scale, ws.q.data(), d, ws.k.data(), d, 0.0f, ws.s.data(),
              kv_seq);
        sgemm(false, true, q_seq, keys, d, 1.0f, dout_h.data(), d, ws.v.data(), d, 0.0f,
              ws.dp.data(), kv_seq);
        const CrossDropout dropout(options, shape, b, h);
        const float* lse_row = lse_data + (b * l.s.heads + h) * q_seq;
        for (int64_t i = 0; i < q_seq; ++i) {
          float* srow = ws.s.data() + i * kv_seq;
          float* dprow = ws.dp.data() + i * kv_seq;
          const float row_lse = lse_row[i], row_delta = delta[size_t(i)];
          if (dropout.on()) {
            dropout.factors(i, keys, ws.factor.data());
          } else {
            std::fill(ws.factor.begin(), ws.factor.begin() + keys, 1.0f);
          }
          const float* z = ws.factor.data();
          // s becomes the dropped probabilities (for dV), dp the score gradient times the
          // scale (for dQ and dK, which both carry the scale of the scores).
#pragma omp simd
          for (int64_t j = 0; j < keys; ++j) {
            const float p = cpu::fast_exp(srow[j] - row_lse);
            dprow[j] = p * (dprow[j] * z[j] - row_delta) * scale;
            srow[j] = p * z[j];
          }
        }
        // Heads of the group add into dk and dv in head order: a fixed summation order.
        sgemm(true, false, keys, d, q_seq, 1.0f, ws.s.data(), kv_seq, dout_h.data(), d, 1.0f,
              dv.data(), d);
        sgemm(true, false, keys, d, q_seq, 1.0f, ws.dp.data(), kv_seq, ws.q.data(), d, 1.0f,
              dk.data(), d);
        // dq overwrites ws.o, whose values are no longer needed.
        sgemm(false, false, q_seq, d, keys, 1.0f, ws.dp.data(), kv_seq, ws.k.data(), d, 0.0f,
              ws.o.data(), d);
        scatter(ws.o.data(), q_seq, d, fdq, l.q_width, b * q_seq, h * d);
      }
      scatter(dk.data(), kv_seq, d, fdkv, l.kv_width, b * kv_seq, shape.key_column(g));
      scatter(dv.data(), kv_seq, d, fdkv, l.kv_width, b * kv_seq, shape.value_column(g));
    }
  }
}

}  // namespace megatron::tensor
