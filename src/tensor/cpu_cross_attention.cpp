// CpuBackend materialised attention: cross-attention (T5's decoder over the encoder output),
// queries of one tensor over the keys and values of another, each sequence with its own length;
// and, with CrossAttentionShape::packed, self-attention over fused QKV rows (causal or not), both
// with an optional additive score bias (T5's relative positions) and its gradient.
//
// T5's sequences are short (512), so a unit of work materialises one head's whole q_seq x kv_seq
// score matrix in f32 scratch and multiplies with OpenBLAS, rather than streaming key blocks as
// the flash kernel does. Forward units are (batch, head); backward units are (batch, key/value
// group), looping over the group's query heads in order, so that a group's key and value
// gradients are summed by one thread in a fixed order. With a bias gradient a backward unit is a
// whole group, looping over the batch in order too, so that the bias gradient of its heads sums
// the batch in a fixed order. Inside the parallel region OpenBLAS runs on the calling thread:
// results are bitwise the same on any number of threads.
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
  int64_t q_width;    // of a q row
  int64_t kv_width;   // of a kv row
  int64_t out_width;  // of an out (and dout) row

  explicit CrossLayout(const CrossAttentionShape& shape)
      : s(shape),
        per_group(shape.heads / shape.groups),
        q_width(shape.q_width()),
        kv_width(shape.kv_width()),
        out_width(shape.out_width()) {}
};

void check_shape(const CrossAttentionShape& s, const char* op) {
  cpu::require(s.batch >= 0 && s.q_seq >= 0 && s.kv_seq > 0 && s.head_dim > 0 && s.groups > 0 &&
                   s.heads > 0 && s.heads % s.groups == 0,
               op,
               "bad shape (kv_seq and head_dim must be positive, heads a positive multiple of "
               "groups)");
  cpu::require(!s.packed || s.q_seq == s.kv_seq, op,
               "a packed shape is self-attention: q_seq (" + std::to_string(s.q_seq) +
                   ") must equal kv_seq (" + std::to_string(s.kv_seq) + ")");
}

void check_options(const CrossAttentionShape& s, const AttentionOptions& o, const char* op) {
  cpu::require(!o.causal || s.q_seq == s.kv_seq, op,
               "a causal mask needs as many queries as keys: q_seq " + std::to_string(s.q_seq) +
                   ", kv_seq " + std::to_string(s.kv_seq));
  cpu::require(o.dropout >= 0.0f && o.dropout < 1.0f, op, "dropout must be in [0, 1)");
  if (o.bias) {
    const Tensor& bias = *o.bias;
    cpu::require(bias.device() == Device::Cpu && bias.dtype() == DType::F32, op,
                 "options.bias must be an f32 tensor on the CPU");
    cpu::require(o.bias_offset >= 0 && o.bias_offset + s.heads <= o.bias_columns, op,
                 "the bias columns " + std::to_string(o.bias_offset) + ".." +
                     std::to_string(o.bias_offset + s.heads - 1) + " of this call's heads are " +
                     "outside its " + std::to_string(o.bias_columns) + " columns");
    cpu::require(bias.numel() == s.q_seq * s.kv_seq * o.bias_columns, op,
                 "options.bias " + to_string(bias.shape()) + " is not [q_seq, kv_seq, " +
                     std::to_string(o.bias_columns) + "]");
  }
  cpu::require(o.first_keys.empty(), op,
               "takes no packed documents (options.first_keys): use attention_forward and "
               "_backward");
  if (o.key_lengths.empty()) return;
  cpu::require(int64_t(o.key_lengths.size()) == s.batch, op,
               "key_lengths has " + std::to_string(o.key_lengths.size()) +
                   " entries for a batch of " + std::to_string(s.batch));
  for (const int64_t keys : o.key_lengths)
    cpu::require(
        keys >= 1 && keys <= s.kv_seq, op,
        "a key length of " + std::to_string(keys) + " is outside 1.." + std::to_string(s.kv_seq));
}

// Whether the bytes of a and b overlap.
bool overlap(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const std::byte*>(a.raw());
  const auto* pb = static_cast<const std::byte*>(b.raw());
  return a.bytes() > 0 && b.bytes() > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
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

// The keys query row i attends to: the first visible(i) of the sequence's `keys`.
struct Visible {
  bool causal;
  int64_t keys;
  int64_t operator()(int64_t i) const { return causal ? std::min(i + 1, keys) : keys; }
};

// The score bias of AttentionOptions, read in place (null: none).
struct ScoreBias {
  const float* data = nullptr;
  int64_t columns = 0, offset = 0, kv_seq = 0;

  ScoreBias(const AttentionOptions& o, const CrossAttentionShape& s)
      : data(o.bias ? o.bias->data<float>() : nullptr),
        columns(o.bias_columns),
        offset(o.bias_offset),
        kv_seq(s.kv_seq) {}
  // srow[j] += bias(h, i, j) for j < n.
  void add(int64_t h, int64_t i, int64_t n, float* srow) const {
    if (!data) return;
    const float* b = data + i * kv_seq * columns + offset + h;
    for (int64_t j = 0; j < n; ++j) srow[j] += b[j * columns];
  }
};

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

// Checks q and kv against the shape (and, packed, that they are one tensor); returns their
// storage.
struct Inputs {
  cpu::Floats q, kv;
};
Inputs check_inputs(const Tensor& q, const Tensor& kv, const CrossLayout& l, const char* op) {
  const cpu::Floats fq = cpu::floats(q, op);
  const std::string q_rows = l.s.packed ? "[batch * seq, (heads + 2 * groups) * head_dim]"
                                        : "[batch * q_seq, heads * head_dim]";
  cpu::require(q.numel() == l.s.batch * l.s.q_seq * l.q_width, op,
               "q " + to_string(q.shape()) + " is not " + q_rows);
  if (l.s.packed) {
    cpu::require(kv.raw() == q.raw() && kv.numel() == q.numel() && kv.dtype() == q.dtype(), op,
                 "with shape.packed, q and kv must be the same fused qkv tensor");
  }
  const cpu::Floats fkv =
      checked(kv, "kv", q.dtype(), l.s.batch * l.s.kv_seq * l.kv_width,
              l.s.packed ? q_rows : "[batch * kv_seq, 2 * groups * head_dim]", op);
  return {fq, fkv};
}

constexpr const char* kOutRows = "[batch * q_seq, heads * head_dim]";

}  // namespace

void CpuBackend::cross_attention_forward(const Tensor& q, const Tensor& kv,
                                         const CrossAttentionShape& shape,
                                         const AttentionOptions& options, Tensor& out,
                                         Tensor& lse) {
  const char* op = "cross_attention_forward";
  check_shape(shape, op);
  check_options(shape, options, op);
  const CrossLayout l(shape);
  const Inputs inputs = check_inputs(q, kv, l, op);
  const cpu::Floats fq = inputs.q, fkv = inputs.kv;
  const int64_t out_numel = l.s.batch * l.s.q_seq * l.out_width;
  const cpu::Floats fout = checked(out, "out", q.dtype(), out_numel, kOutRows, op);
  cpu::require(!overlap(out, q), op, "out must not overlap q");
  check_lse(lse, shape, op);
  if (out_numel == 0) return;
  float* lse_data = lse.data<float>();
  const ScoreBias bias(options, shape);
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
      const Visible visible{options.causal, keys};
      gather(fq, l.q_width, b * q_seq, shape.query_column(h), q_seq, d, ws.q.data());
      gather(fkv, l.kv_width, b * kv_seq, shape.key_column(g), keys, d, ws.k.data());
      gather(fkv, l.kv_width, b * kv_seq, shape.value_column(g), keys, d, ws.v.data());
      // Scores of the attended keys only: [q_seq, keys], rows kv_seq apart.
      sgemm(false, true, q_seq, keys, d, options.scale, ws.q.data(), d, ws.k.data(), d, 0.0f,
            ws.s.data(), kv_seq);
      const CrossDropout dropout(options, shape, b, h);
      float* lse_row = lse_data + unit * q_seq;
      for (int64_t i = 0; i < q_seq; ++i) {
        float* srow = ws.s.data() + i * kv_seq;
        const int64_t n = visible(i);
        bias.add(h, i, n, srow);
        const float max = cpu::max_of(srow, n, -std::numeric_limits<float>::infinity());
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; ++j) {
          srow[j] = cpu::fast_exp(srow[j] - max);
          sum += srow[j];
        }
        // The normaliser is of the undropped probabilities, as attention_forward's lse is.
        lse_row[i] = max + std::log(sum);
        const float inv = 1.0f / sum;
        if (dropout.on()) {
          dropout.factors(i, n, ws.factor.data());
          const float* z = ws.factor.data();
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) srow[j] *= inv * z[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) srow[j] *= inv;
        }
        std::fill(srow + n, srow + keys, 0.0f);  // keys after the query (causal)
      }
      sgemm(false, false, q_seq, d, keys, 1.0f, ws.s.data(), kv_seq, ws.v.data(), d, 0.0f,
            ws.o.data(), d);
      scatter(ws.o.data(), q_seq, d, fout, l.out_width, b * q_seq, h * d);
    }
  }
}

void CpuBackend::cross_attention_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                          const Tensor& dout, const Tensor& lse,
                                          const CrossAttentionShape& shape,
                                          const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                                          Tensor* dbias) {
  const char* op = "cross_attention_backward";
  check_shape(shape, op);
  check_options(shape, options, op);
  const CrossLayout l(shape);
  const int64_t out_numel = l.s.batch * l.s.q_seq * l.out_width;
  const int64_t kv_numel = l.s.batch * l.s.kv_seq * l.kv_width;
  const Inputs inputs = check_inputs(q, kv, l, op);
  const cpu::Floats fq = inputs.q, fkv = inputs.kv;
  const std::string q_rows = l.s.packed ? "q's shape" : "[batch * q_seq, heads * head_dim]";
  const std::string kv_rows = l.s.packed ? "kv's shape" : "[batch * kv_seq, 2 * groups * head_dim]";
  const cpu::Floats fout = checked(out, "out", q.dtype(), out_numel, kOutRows, op);
  const cpu::Floats fdout = checked(dout, "dout", q.dtype(), out_numel, kOutRows, op);
  const cpu::Floats fdq = checked(dq, "dq", q.dtype(), q.numel(), q_rows, op);
  const cpu::Floats fdkv = checked(dkv, "dkv", q.dtype(), kv_numel, kv_rows, op);
  if (l.s.packed) {
    cpu::require(dq.raw() == dkv.raw(), op,
                 "with shape.packed, dq and dkv must be the same dqkv tensor (each gets its "
                 "own columns)");
  } else {
    cpu::require(!overlap(dq, dkv), op, "dq and dkv must not overlap");
  }
  for (const Tensor* input : {&q, &kv})
    cpu::require(!overlap(*input, dq) && !overlap(*input, dkv), op,
                 "the gradients must not overlap q or kv");
  check_lse(lse, shape, op);
  if (options.bias) {
    cpu::require(dbias != nullptr, op,
                 "options.bias is set: its gradient needs a dbias tensor to accumulate into");
    cpu::require(dbias->device() == Device::Cpu && dbias->dtype() == DType::F32 &&
                     dbias->shape() == options.bias->shape(),
                 op,
                 "dbias must be an f32 tensor on the CPU of the bias's shape " +
                     to_string(options.bias->shape()));
    cpu::require(!overlap(*dbias, *options.bias), op, "dbias must not overlap the bias");
  } else {
    cpu::require(dbias == nullptr, op, "a dbias without options.bias: there is no bias gradient");
  }
  if (kv_numel == 0) return;
  if (out_numel == 0) {  // no queries (not packed): nothing reads the keys and values
    fill(dkv, 0.0);
    return;
  }
  const float* lse_data = lse.data<float>();
  const ScoreBias bias(options, shape);
  float* dbias_data = dbias ? dbias->data<float>() : nullptr;
  const int64_t d = l.s.head_dim, q_seq = l.s.q_seq, kv_seq = l.s.kv_seq;
  const int64_t scores = q_seq * kv_seq;  // of one head
  const float scale = options.scale;
  // With a bias gradient a unit is a whole group over the batch (see the top of the file).
  const bool whole_batch = dbias_data != nullptr;
  const int64_t units = whole_batch ? l.s.groups : l.s.batch * l.s.groups;
  const double flops =
      10.0 * double(l.s.batch * l.s.heads) * double(q_seq) * double(kv_seq) * double(d);
#pragma omp parallel num_threads(threads_) if (units > 1 && flops >= kParallelFlops)
  {
    Scratch ws(shape, true);
    std::vector<float> dk(static_cast<size_t>(kv_seq * d)), dv(static_cast<size_t>(kv_seq * d)),
        dout_h(static_cast<size_t>(q_seq * d)), delta(static_cast<size_t>(q_seq));
    // The score gradients of the group's heads summed over the batch: [per_group, q_seq, kv_seq].
    std::vector<float> dscore(whole_batch ? static_cast<size_t>(l.per_group * scores) : 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t g = unit % l.s.groups;
      const int64_t b_first = whole_batch ? 0 : unit / l.s.groups;
      const int64_t b_end = whole_batch ? l.s.batch : b_first + 1;
      std::fill(dscore.begin(), dscore.end(), 0.0f);
      for (int64_t b = b_first; b < b_end; ++b) {
        const int64_t keys = keys_of(options, shape, b);
        const Visible visible{options.causal, keys};
        gather(fkv, l.kv_width, b * kv_seq, shape.key_column(g), keys, d, ws.k.data());
        gather(fkv, l.kv_width, b * kv_seq, shape.value_column(g), keys, d, ws.v.data());
        // Masked keys get no gradient: their rows stay zero.
        std::fill(dk.begin(), dk.end(), 0.0f);
        std::fill(dv.begin(), dv.end(), 0.0f);
        for (int64_t h = g * l.per_group; h < (g + 1) * l.per_group; ++h) {
          gather(fq, l.q_width, b * q_seq, shape.query_column(h), q_seq, d, ws.q.data());
          gather(fout, l.out_width, b * q_seq, h * d, q_seq, d, ws.o.data());
          gather(fdout, l.out_width, b * q_seq, h * d, q_seq, d, dout_h.data());
          // delta_i = rowsum(dO_i * O_i) = rowsum(P~_i * dP~_i), the softmax's backward term.
          for (int64_t i = 0; i < q_seq; ++i) {
            const float* o_row = ws.o.data() + i * d;
            const float* g_row = dout_h.data() + i * d;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int64_t c = 0; c < d; ++c) sum += o_row[c] * g_row[c];
            delta[size_t(i)] = sum;
          }
          sgemm(false, true, q_seq, keys, d, scale, ws.q.data(), d, ws.k.data(), d, 0.0f,
                ws.s.data(), kv_seq);
          sgemm(false, true, q_seq, keys, d, 1.0f, dout_h.data(), d, ws.v.data(), d, 0.0f,
                ws.dp.data(), kv_seq);
          const CrossDropout dropout(options, shape, b, h);
          const float* lse_row = lse_data + (b * l.s.heads + h) * q_seq;
          float* dscore_h = whole_batch ? dscore.data() + (h - g * l.per_group) * scores : nullptr;
          for (int64_t i = 0; i < q_seq; ++i) {
            float* srow = ws.s.data() + i * kv_seq;
            float* dprow = ws.dp.data() + i * kv_seq;
            const int64_t n = visible(i);
            bias.add(h, i, n, srow);
            const float row_lse = lse_row[i], row_delta = delta[size_t(i)];
            if (dropout.on()) {
              dropout.factors(i, n, ws.factor.data());
            } else {
              std::fill(ws.factor.begin(), ws.factor.begin() + n, 1.0f);
            }
            const float* z = ws.factor.data();
            // s becomes the dropped probabilities (for dV), dp the score gradient
            // dS = P * (dP - delta) (summed into the bias gradient) times the scale (for dQ
            // and dK, which both carry the scale of the scores).
            if (dscore_h) {
              float* acc = dscore_h + i * kv_seq;
#pragma omp simd
              for (int64_t j = 0; j < n; ++j) {
                const float p = cpu::fast_exp(srow[j] - row_lse);
                const float ds = p * (dprow[j] * z[j] - row_delta);
                acc[j] += ds;
                dprow[j] = ds * scale;
                srow[j] = p * z[j];
              }
            } else {
#pragma omp simd
              for (int64_t j = 0; j < n; ++j) {
                const float p = cpu::fast_exp(srow[j] - row_lse);
                dprow[j] = p * (dprow[j] * z[j] - row_delta) * scale;
                srow[j] = p * z[j];
              }
            }
            // Keys after the query (causal) take no part.
            std::fill(srow + n, srow + keys, 0.0f);
            std::fill(dprow + n, dprow + keys, 0.0f);
          }
          // Heads of the group add into dk and dv in head order: a fixed summation order.
          sgemm(true, false, keys, d, q_seq, 1.0f, ws.s.data(), kv_seq, dout_h.data(), d, 1.0f,
                dv.data(), d);
          sgemm(true, false, keys, d, q_seq, 1.0f, ws.dp.data(), kv_seq, ws.q.data(), d, 1.0f,
                dk.data(), d);
          // dq overwrites ws.o, whose values are no longer needed.
          sgemm(false, false, q_seq, d, keys, 1.0f, ws.dp.data(), kv_seq, ws.k.data(), d, 0.0f,
                ws.o.data(), d);
          // Packed, dq and dkv are one tensor: dq fills the query columns only, dk and dv below
          // the key and value columns only.
          scatter(ws.o.data(), q_seq, d, fdq, l.q_width, b * q_seq, shape.query_column(h));
        }
        scatter(dk.data(), kv_seq, d, fdkv, l.kv_width, b * kv_seq, shape.key_column(g));
        scatter(dv.data(), kv_seq, d, fdkv, l.kv_width, b * kv_seq, shape.value_column(g));
      }
      // The group's columns of dbias are this unit's alone.
      for (int64_t k = 0; whole_batch && k < l.per_group; ++k) {
        const float* acc = dscore.data() + k * scores;
        float* column = dbias_data + options.bias_offset + g * l.per_group + k;
        for (int64_t ij = 0; ij < scores; ++ij) column[ij * options.bias_columns] += acc[ij];
      }
    }
  }
}

}  // namespace megatron::tensor
