// CpuBackend materialised attention (cross_attention_*) against a naive double
// softmax(scale q k^T + bias) v written here from the documented layouts (separate q and kv, or
// packed fused QKV rows), its backward (and the bias gradient) against that reference's textbook
// backward and central differences, and its dropout and causal mask against self-attention's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/random.hpp"
#include "tensor/scoped_threads.hpp"

namespace megatron::tensor {
namespace cpu_cross_attention_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;
using test_support::ScopedThreads;

using CrossShape = CrossAttentionShape;

// Where the reference reads. Not packed: q head h at h * head_dim; group g's key at 2 g head_dim,
// its value next. Packed: both in one fused QKV row, at AttentionShape's columns. out (and dout):
// head h at h * head_dim either way.
struct Columns {
  const CrossShape& s;
  AttentionShape self() const {
    return {.batch = s.batch,
            .seq = s.q_seq,
            .heads = s.heads,
            .groups = s.groups,
            .head_dim = s.head_dim};
  }
  int64_t q_width() const { return s.packed ? self().qkv_width() : s.heads * s.head_dim; }
  int64_t kv_width() const { return s.packed ? self().qkv_width() : 2 * s.groups * s.head_dim; }
  int64_t out_width() const { return s.heads * s.head_dim; }
  int64_t group(int64_t h) const { return h / (s.heads / s.groups); }
  int64_t query(int64_t h) const { return s.packed ? self().query_column(h) : h * s.head_dim; }
  int64_t key(int64_t h) const {
    return s.packed ? self().key_column(group(h)) : 2 * group(h) * s.head_dim;
  }
  int64_t value(int64_t h) const { return key(h) + s.head_dim; }
};

size_t q_size(const CrossShape& s) { return size_t(s.batch * s.q_seq * Columns{s}.q_width()); }
size_t kv_size(const CrossShape& s) { return size_t(s.batch * s.kv_seq * Columns{s}.kv_width()); }
size_t out_size(const CrossShape& s) { return size_t(s.batch * s.q_seq * s.heads * s.head_dim); }

// Element (row, column) of a row-major matrix `width` wide.
size_t at(int64_t row, int64_t width, int64_t column) { return size_t(row * width + column); }

int64_t keys_of(const CrossShape& s, const AttentionOptions& o, int64_t b) {
  return o.key_lengths.empty() ? s.kv_seq : o.key_lengths[size_t(b)];
}

// The keys query i of sequence b attends to: the first `visible` (causal: also only j <= i).
int64_t visible(const CrossShape& s, const AttentionOptions& o, int64_t b, int64_t i) {
  const int64_t keys = keys_of(s, o, b);
  return o.causal ? std::min(keys, i + 1) : keys;
}

// The bias added to score (h, i, j), straight from the documented index (0 without a bias).
double bias_at(const CrossShape& s, const AttentionOptions& o, int64_t h, int64_t i, int64_t j) {
  if (!o.bias) return 0.0;
  return double(o.bias->data<float>()[(i * s.kv_seq + j) * o.bias_columns + o.bias_offset + h]);
}

// The dropout multiplier of probability (b, h, i, j), straight from the documented index.
double dropout_factor(const CrossShape& s, const AttentionOptions& o, int64_t b, int64_t h,
                      int64_t i, int64_t j) {
  if (o.dropout == 0.0f) return 1.0;
  const int64_t total = o.total_heads > 0 ? o.total_heads : s.heads;
  const auto index = uint64_t(((b * total + o.head_offset + h) * s.q_seq + i) * s.kv_seq + j);
  return uniform_at(o.rng, index) >= o.dropout ? 1.0 / (1.0 - double(o.dropout)) : 0.0;
}

// Undropped probabilities of query row i of head (b, h) over every key, masked ones 0.
std::vector<double> probabilities(const std::vector<float>& q, const std::vector<float>& kv,
                                  const CrossShape& s, const AttentionOptions& o, int64_t b,
                                  int64_t h, int64_t i, double* lse) {
  const Columns col{s};
  const int64_t keys = visible(s, o, b, i);
  std::vector<double> p(size_t(s.kv_seq), 0.0);
  double max = -INFINITY;
  for (int64_t j = 0; j < keys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      dot += double(q[at(b * s.q_seq + i, col.q_width(), col.query(h) + d)]) *
             double(kv[at(b * s.kv_seq + j, col.kv_width(), col.key(h) + d)]);
    }
    p[size_t(j)] = double(o.scale) * dot + bias_at(s, o, h, i, j);
    max = std::max(max, p[size_t(j)]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < keys; ++j) sum += std::exp(p[size_t(j)] - max);
  for (int64_t j = 0; j < keys; ++j) p[size_t(j)] = std::exp(p[size_t(j)] - max) / sum;
  if (lse) *lse = max + std::log(sum);
  return p;
}

struct Naive {
  std::vector<double> out;  // [batch * q_seq, heads * head_dim]
  std::vector<double> lse;  // [batch, heads, q_seq]
};

Naive naive_forward(const std::vector<float>& q, const std::vector<float>& kv, const CrossShape& s,
                    const AttentionOptions& o) {
  const Columns col{s};
  Naive f{std::vector<double>(out_size(s)),
          std::vector<double>(size_t(s.batch * s.heads * s.q_seq))};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_seq; ++i) {
        double lse = 0.0;
        const auto p = probabilities(q, kv, s, o, b, h, i, &lse);
        f.lse[size_t((b * s.heads + h) * s.q_seq + i)] = lse;
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double w = p[size_t(j)] * dropout_factor(s, o, b, h, i, j);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            f.out[at(b * s.q_seq + i, col.out_width(), h * s.head_dim + d)] +=
                w * double(kv[at(b * s.kv_seq + j, col.kv_width(), col.value(h) + d)]);
          }
        }
      }
  return f;
}

struct NaiveGrads {
  std::vector<double> dq, dkv;
  std::vector<double> dbias;  // the bias's numel (empty without one): sum over b of dS
};

// The textbook backward: dV = P~^T dO, dP~ = dO V^T, dP = dP~ * dropout, dS = P * (dP -
// rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q, dbias = sum over the batch of dS.
// Packed (q and kv the same values), dq and dkv each hold their own columns, zeros elsewhere.
NaiveGrads naive_backward(const std::vector<float>& q, const std::vector<float>& kv,
                          const std::vector<float>& dout, const CrossShape& s,
                          const AttentionOptions& o) {
  const Columns col{s};
  NaiveGrads g{std::vector<double>(q.size()), std::vector<double>(kv.size()),
               std::vector<double>(o.bias ? size_t(o.bias->numel()) : 0)};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_seq; ++i) {
        const auto p = probabilities(q, kv, s, o, b, h, i, nullptr);
        const size_t q_row = at(b * s.q_seq + i, col.q_width(), col.query(h));
        const size_t out_row = at(b * s.q_seq + i, col.out_width(), h * s.head_dim);
        std::vector<double> dp(size_t(s.kv_seq), 0.0);
        double row_dot = 0.0;
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double z = dropout_factor(s, o, b, h, i, j);
          const size_t v_row = at(b * s.kv_seq + j, col.kv_width(), col.value(h));
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            const double gd = dout[out_row + size_t(d)];
            dot += gd * double(kv[v_row + size_t(d)]);
            g.dkv[v_row + size_t(d)] += p[size_t(j)] * z * gd;
          }
          dp[size_t(j)] = dot * z;
          row_dot += p[size_t(j)] * dp[size_t(j)];
        }
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double ds = p[size_t(j)] * (dp[size_t(j)] - row_dot);
          if (o.bias) {
            g.dbias[size_t((i * s.kv_seq + j) * o.bias_columns + o.bias_offset + h)] += ds;
          }
          const size_t k_row = at(b * s.kv_seq + j, col.kv_width(), col.key(h));
          for (int64_t d = 0; d < s.head_dim; ++d) {
            g.dq[q_row + size_t(d)] += double(o.scale) * ds * double(kv[k_row + size_t(d)]);
            g.dkv[k_row + size_t(d)] += double(o.scale) * ds * double(q[q_row + size_t(d)]);
          }
        }
      }
  return g;
}

// Packed: the reference's dq and dkv in the one dqkv tensor (their columns are disjoint).
std::vector<double> packed(const NaiveGrads& g) {
  std::vector<double> dqkv(g.dq.size());
  for (size_t i = 0; i < dqkv.size(); ++i) dqkv[i] = g.dq[i] + g.dkv[i];
  return dqkv;
}

// Every |got - want| within tolerance + relative * |want|.
void expect_all_near(const std::vector<float>& got, const std::vector<double>& want,
                     double tolerance, const char* what, double relative = 0.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tolerance + relative * std::abs(want[i]);
    if (!(std::abs(double(got[i]) - want[i]) <= bound) && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << got.size() << " off";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

AttentionOptions options_for(const CrossShape& s, float dropout = 0.0f,
                             std::vector<int64_t> key_lengths = {}) {
  return {.scale = 1.0f / std::sqrt(float(s.head_dim)),
          .causal = false,
          .dropout = dropout,
          .rng = {.seed = 4321, .stream = 99},
          .key_lengths = std::move(key_lengths)};
}

struct Inputs {
  std::vector<float> q, kv;  // packed: both the fused qkv values
};

Inputs random_inputs(const CrossShape& s, uint32_t seed) {
  if (s.packed) {
    const auto qkv = random_values(q_size(s), seed);
    return {qkv, qkv};
  }
  return {random_values(q_size(s), seed), random_values(kv_size(s), seed + 1000)};
}

// Rounds every value to bf16 (or f16), so that the double reference sees what the op sees.
void round_to(DType dtype, std::vector<float>& values) {
  for (float& x : values) x = dtype == DType::Bf16 ? to_float(to_bf16(x)) : to_float(to_f16(x));
}

// q and kv as tensors: packed, one tensor passed as both.
struct Operands {
  Tensor q, kv;
};
Operands operands(CpuBackend& backend, const Inputs& in, const CrossShape& s, DType dtype) {
  const Columns col{s};
  const Tensor q = from_floats(backend, in.q, {s.batch * s.q_seq, col.q_width()}, dtype);
  if (s.packed) return {q, q};
  return {q, from_floats(backend, in.kv, {s.batch * s.kv_seq, col.kv_width()}, dtype)};
}

struct Result {
  std::vector<float> out, lse;
};

Result run_forward(CpuBackend& backend, const Inputs& in, const CrossShape& s,
                   const AttentionOptions& o, DType dtype = DType::F32) {
  const Operands x = operands(backend, in, s, dtype);
  Tensor out = backend.empty({s.batch * s.q_seq, s.heads * s.head_dim}, dtype);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  backend.cross_attention_forward(x.q, x.kv, s, o, out, lse);
  return {to_floats(backend, out), to_floats(backend, lse)};
}

struct Grads {
  std::vector<float> dq, dkv;  // packed: both the one dqkv
  std::vector<float> dbias;    // with a bias: dbias_start plus its gradient
};

// The forward then the backward with dL/dout = dout, all tensors of `dtype`. With options.bias,
// the bias gradient accumulates onto dbias_start (zeros when empty).
Grads run_backward(CpuBackend& backend, const Inputs& in, const std::vector<float>& dout,
                   const CrossShape& s, const AttentionOptions& o, DType dtype = DType::F32,
                   const std::vector<float>& dbias_start = {}) {
  const Operands x = operands(backend, in, s, dtype);
  Tensor out = backend.empty({s.batch * s.q_seq, s.heads * s.head_dim}, dtype);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  backend.cross_attention_forward(x.q, x.kv, s, o, out, lse);
  const Tensor dy = from_floats(backend, dout, out.shape(), dtype);
  Tensor dq = backend.empty(x.q.shape(), dtype);
  Tensor dkv = s.packed ? dq : backend.empty(x.kv.shape(), dtype);
  // Garbage first: the gradients must be overwritten, masked keys' rows included.
  backend.fill(dq, 123.0);
  backend.fill(dkv, 123.0);
  Tensor dbias;
  if (o.bias) {
    dbias = dbias_start.empty() ? backend.zeros(o.bias->shape(), DType::F32)
                                : from_floats(backend, dbias_start, o.bias->shape());
  }
  backend.cross_attention_backward(x.q, x.kv, out, dy, lse, s, o, dq, dkv,
                                   o.bias ? &dbias : nullptr);
  return {to_floats(backend, dq), to_floats(backend, dkv),
          o.bias ? to_floats(backend, dbias) : std::vector<float>{}};
}

// Decoder queries fewer than encoder keys (T5's usual case) and the other way round; GQA with
// two query heads a group; head_dim 12, not a multiple of 8 (a vector of floats).
constexpr CrossShape kFewerQueries{
    .batch = 2, .q_seq = 5, .kv_seq = 13, .heads = 4, .groups = 2, .head_dim = 12};
constexpr CrossShape kMoreQueries{
    .batch = 2, .q_seq = 13, .kv_seq = 5, .heads = 4, .groups = 2, .head_dim = 12};

// Outputs are convex combinations of values of magnitude ~1, from scores of magnitude ~3,
// computed in f32: rounding (and fast_exp's 2 ulp) leaves them within ~1e-6 of the double result.
constexpr double kForwardTolerance = 5e-6;
// lse ~ log(kv_seq) + max score ~ 5, to f32 precision plus the exponential's few ulp.
constexpr double kLseTolerance = 5e-6;
// Gradients sum up to a few hundred products of magnitude ~1 in f32: ~1e-6 from the double result,
// the 1e-5 bound leaving room for dropout's 1 / (1 - p) scaling of each term.
constexpr double kBackwardTolerance = 1e-5;

TEST(CpuCrossAttention, ForwardMatchesNaiveSoftmaxWhenQueriesAreFewerThanKeys) {
  CpuBackend backend(2);
  const auto in = random_inputs(kFewerQueries, 1);
  const auto o = options_for(kFewerQueries);
  const Result got = run_forward(backend, in, kFewerQueries, o);
  const Naive want = naive_forward(in.q, in.kv, kFewerQueries, o);
  expect_all_near(got.out, want.out, kForwardTolerance, "out");
  expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
}

TEST(CpuCrossAttention, ForwardMatchesNaiveSoftmaxWhenQueriesOutnumberKeys) {
  CpuBackend backend(2);
  const auto in = random_inputs(kMoreQueries, 2);
  const auto o = options_for(kMoreQueries);
  const Result got = run_forward(backend, in, kMoreQueries, o);
  const Naive want = naive_forward(in.q, in.kv, kMoreQueries, o);
  expect_all_near(got.out, want.out, kForwardTolerance, "out");
  expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
}

TEST(CpuCrossAttention, KeyLengthsMaskKeysAtAndAfterTheLength) {
  CpuBackend backend(2);
  const CrossShape s{.batch = 3, .q_seq = 5, .kv_seq = 13, .heads = 4, .groups = 2, .head_dim = 12};
  const auto in = random_inputs(s, 3);
  const auto o = options_for(s, 0.0f, {13, 1, 7});  // every key, a single key, some
  const Result got = run_forward(backend, in, s, o);
  const Naive want = naive_forward(in.q, in.kv, s, o);
  expect_all_near(got.out, want.out, kForwardTolerance, "out");
  expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
}

TEST(CpuCrossAttention, MaskedKeysChangeNothingWhateverTheyHold) {
  CpuBackend backend(1);
  const CrossShape s{.batch = 1, .q_seq = 6, .kv_seq = 9, .heads = 2, .groups = 1, .head_dim = 8};
  const auto o = options_for(s, 0.2f, {4});
  auto in = random_inputs(s, 4);
  const Result before = run_forward(backend, in, s, o);
  for (size_t i = size_t(4 * 2 * s.head_dim); i < in.kv.size(); ++i) in.kv[i] *= -7.0f;
  const Result after = run_forward(backend, in, s, o);
  EXPECT_TRUE(same_bits(before.out, after.out));
  EXPECT_TRUE(same_bits(before.lse, after.lse));
}

TEST(CpuCrossAttention, GroupedQueryHeadsReadTheirGroupsKeysAndValues) {
  // Four query heads over two groups equal four heads over four groups in which heads 0, 1
  // find group 0's keys and values and heads 2, 3 group 1's.
  CpuBackend backend(2);
  const CrossShape grouped = kFewerQueries;
  CrossShape separate = grouped;
  separate.groups = 4;
  const auto in = random_inputs(grouped, 5);
  Inputs expanded{in.q, {}};
  const int64_t d = grouped.head_dim;
  for (int64_t row = 0; row < grouped.batch * grouped.kv_seq; ++row)
    for (int64_t h = 0; h < 4; ++h) {
      const auto first = in.kv.begin() + row * 2 * grouped.groups * d + (h / 2) * 2 * d;
      expanded.kv.insert(expanded.kv.end(), first, first + 2 * d);
    }
  const auto o = options_for(grouped);
  EXPECT_TRUE(same_bits(run_forward(backend, in, grouped, o).out,
                        run_forward(backend, expanded, separate, o).out));
}

TEST(CpuCrossAttention, DropoutForwardMatchesReferenceWithTheSameMask) {
  CpuBackend backend(2);
  const auto in = random_inputs(kMoreQueries, 6);
  AttentionOptions o = options_for(kMoreQueries, 0.3f, {5, 3});
  o.head_offset = 4;  // this rank's heads 4..7 of 12
  o.total_heads = 12;
  // Kept probabilities are scaled by 1 / 0.7, and so is the rounding error.
  expect_all_near(run_forward(backend, in, kMoreQueries, o).out,
                  naive_forward(in.q, in.kv, kMoreQueries, o).out, kForwardTolerance / 0.7, "out");
}

TEST(CpuCrossAttention, DropoutNumbersProbabilitiesAsSelfAttentionDoes) {
  // With as many queries as keys, cross-attention over q and kv cut from a fused qkv is
  // bidirectional self-attention over that qkv: with the same dropout key, head offset and total
  // heads, the same probabilities must be dropped.
  CpuBackend backend(2);
  const AttentionShape self{.batch = 2, .seq = 11, .heads = 4, .groups = 2, .head_dim = 12};
  const CrossShape cross{
      .batch = 2, .q_seq = 11, .kv_seq = 11, .heads = 4, .groups = 2, .head_dim = 12};
  const int64_t d = self.head_dim, rows = self.batch * self.seq;
  const auto qkv = random_values(size_t(rows * self.qkv_width()), 7);
  Inputs in;
  for (int64_t row = 0; row < rows; ++row) {
    const auto base = qkv.begin() + row * self.qkv_width();
    for (int64_t h = 0; h < self.heads; ++h) {
      in.q.insert(in.q.end(), base + self.query_column(h), base + self.query_column(h) + d);
    }
    for (int64_t g = 0; g < self.groups; ++g) {
      in.kv.insert(in.kv.end(), base + self.key_column(g), base + self.key_column(g) + d);
      in.kv.insert(in.kv.end(), base + self.value_column(g), base + self.value_column(g) + d);
    }
  }
  AttentionOptions o = options_for(cross, 0.4f, {11, 6});
  o.head_offset = 2;
  o.total_heads = 8;
  const Tensor x = from_floats(backend, qkv, {rows, self.qkv_width()});
  Tensor out = backend.empty({rows, self.heads * d}, DType::F32);
  Tensor lse = backend.empty({self.batch, self.heads, self.seq}, DType::F32);
  backend.attention_forward(x, self, o, out, lse);
  // Both compute in f32 in different orders; a probability dropped by one and kept by the other
  // would move an output by ~0.1.
  const Result got = run_forward(backend, in, cross, o);
  const auto want = to_floats(backend, out);
  expect_all_near(got.out, std::vector<double>(want.begin(), want.end()), 1e-5, "out");
  const auto want_lse = to_floats(backend, lse);
  expect_all_near(got.lse, std::vector<double>(want_lse.begin(), want_lse.end()), 1e-5, "lse");
}

TEST(CpuCrossAttention, SixteenBitForwardMatchesNaiveSoftmaxOfTheRoundedInputs) {
  CpuBackend backend(2);
  for (const DType dtype : {DType::Bf16, DType::F16}) {
    SCOPED_TRACE(name(dtype));
    auto in = random_inputs(kFewerQueries, 8);
    round_to(dtype, in.q);
    round_to(dtype, in.kv);
    const auto o = options_for(kFewerQueries, 0.0f, {13, 9});
    const Naive want = naive_forward(in.q, in.kv, kFewerQueries, o);
    // The math is f32 on the rounded inputs; only the output is rounded on the way out: half an
    // ulp, 2^-9 relative in bf16 (8 significant bits), 2^-12 in f16 (11).
    const double relative = dtype == DType::Bf16 ? 1.0 / 256 : 1.0 / 2048;
    const Result got = run_forward(backend, in, kFewerQueries, o, dtype);
    expect_all_near(got.out, want.out, kForwardTolerance, "out", relative);
    expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
  }
}

TEST(CpuCrossAttention, BackwardMatchesNaiveDoubleBackward) {
  CpuBackend backend(2);
  for (const CrossShape& s : {kFewerQueries, kMoreQueries}) {
    SCOPED_TRACE(std::to_string(s.q_seq) + " queries over " + std::to_string(s.kv_seq) + " keys");
    const auto in = random_inputs(s, 9);
    const auto dout = random_values(out_size(s), 10);
    const auto o = options_for(s, 0.0f, {s.kv_seq, 3});
    const Grads got = run_backward(backend, in, dout, s, o);
    const NaiveGrads want = naive_backward(in.q, in.kv, dout, s, o);
    expect_all_near(got.dq, want.dq, kBackwardTolerance, "dq");
    expect_all_near(got.dkv, want.dkv, kBackwardTolerance, "dkv");
  }
}

TEST(CpuCrossAttention, DropoutBackwardMatchesNaiveDoubleBackwardWithTheSameMask) {
  CpuBackend backend(2);
  for (const CrossShape& s : {kFewerQueries, kMoreQueries}) {
    SCOPED_TRACE(std::to_string(s.q_seq) + " queries over " + std::to_string(s.kv_seq) + " keys");
    const auto in = random_inputs(s, 11);
    const auto dout = random_values(out_size(s), 12);
    AttentionOptions o = options_for(s, 0.3f, {4, s.kv_seq});
    o.head_offset = 1;
    o.total_heads = 6;
    const Grads got = run_backward(backend, in, dout, s, o);
    const NaiveGrads want = naive_backward(in.q, in.kv, dout, s, o);
    expect_all_near(got.dq, want.dq, kBackwardTolerance, "dq");
    expect_all_near(got.dkv, want.dkv, kBackwardTolerance, "dkv");
  }
}

TEST(CpuCrossAttention, Bf16BackwardMatchesNaiveDoubleBackwardOfTheRoundedInputs) {
  CpuBackend backend(2);
  const CrossShape& s = kFewerQueries;
  auto in = random_inputs(s, 13);
  auto dout = random_values(out_size(s), 14);
  round_to(DType::Bf16, in.q);
  round_to(DType::Bf16, in.kv);
  round_to(DType::Bf16, dout);
  const auto o = options_for(s, 0.2f, {13, 8});
  const Grads got = run_backward(backend, in, dout, s, o, DType::Bf16);
  const NaiveGrads want = naive_backward(in.q, in.kv, dout, s, o);
  // Besides rounding each gradient to bf16 (2^-9 relative), the backward reads the forward's
  // output rounded to bf16 for delta = rowsum(dO * O): an error of ~2^-9 * |dO| |O| sqrt(head_dim)
  // ~ 1e-2 in delta, which moves each gradient by up to ~1e-2 * scale * |k| (or |q|): hence an
  // absolute 2e-2 beside the relative 1/128.
  expect_all_near(got.dq, want.dq, 2e-2, "dq", 1.0 / 128);
  expect_all_near(got.dkv, want.dkv, 2e-2, "dkv", 1.0 / 128);
}

// Central differences in f32 with eps 1e-2 over ~100 weighted outputs: the numeric gradient
// carries noise of ~1e-4 and curvature error of ~eps^2, within 0.2% of the largest gradient
// (~1); a missing term, a wrong mask or a wrong group is off by far more. Packed, the one dqkv
// against the numeric gradient of the one qkv.
void check_gradient(const CrossShape& s, const AttentionOptions& o) {
  CpuBackend backend(1);
  const auto in = random_inputs(s, 15);
  const auto weights = random_values(out_size(s), 16);
  const Grads got = run_backward(backend, in, weights, s, o);
  if (s.packed) {
    const auto numeric = numeric_gradient(
        in.q,
        [&](const std::vector<float>& qkv) {
          return run_forward(backend, {qkv, qkv}, s, o).out;
        },
        weights);
    expect_gradient_near(got.dq, numeric, 2e-3, 1e-4, "dqkv");
    return;
  }
  const auto numeric_dq = numeric_gradient(
      in.q,
      [&](const std::vector<float>& q) {
        return run_forward(backend, {q, in.kv}, s, o).out;
      },
      weights);
  const auto numeric_dkv = numeric_gradient(
      in.kv,
      [&](const std::vector<float>& kv) {
        return run_forward(backend, {in.q, kv}, s, o).out;
      },
      weights);
  expect_gradient_near(got.dq, numeric_dq, 2e-3, 1e-4, "dq");
  expect_gradient_near(got.dkv, numeric_dkv, 2e-3, 1e-4, "dkv");
}

TEST(CpuCrossAttention, BackwardMatchesNumericGradientOfAWeightedSumOfTheOutput) {
  const CrossShape s{.batch = 2, .q_seq = 3, .kv_seq = 5, .heads = 4, .groups = 2, .head_dim = 3};
  check_gradient(s, options_for(s, 0.0f, {5, 2}));
}

TEST(CpuCrossAttention, DropoutBackwardMatchesNumericGradientOfAWeightedSumOfTheOutput) {
  const CrossShape s{.batch = 2, .q_seq = 5, .kv_seq = 3, .heads = 2, .groups = 1, .head_dim = 3};
  check_gradient(s, options_for(s, 0.3f, {3, 2}));
}

TEST(CpuCrossAttention, NoQueriesLeaveZeroKeyAndValueGradients) {
  CpuBackend backend(1);
  const CrossShape s{.batch = 2, .q_seq = 0, .kv_seq = 4, .heads = 2, .groups = 1, .head_dim = 4};
  const Grads got = run_backward(backend, random_inputs(s, 17), {}, s, options_for(s));
  EXPECT_EQ(got.dkv, std::vector<float>(kv_size(s), 0.0f));
}

// Large enough that both passes run their units on the team, with dropout and a mask.
constexpr CrossShape kThreaded{
    .batch = 2, .q_seq = 128, .kv_seq = 200, .heads = 4, .groups = 2, .head_dim = 64};

template <typename Fn>
auto on_threads(int threads, Fn&& fn) {
  ScopedThreads scope(threads);
  CpuBackend backend(threads);
  return fn(backend);
}

TEST(CpuCrossAttention, ForwardIsBitwiseTheSameOnOneAndTwoThreads) {
  const auto in = random_inputs(kThreaded, 18);
  const auto o = options_for(kThreaded, 0.1f, {200, 77});
  const auto run = [&](CpuBackend& backend) { return run_forward(backend, in, kThreaded, o); };
  const Result one = on_threads(1, run), two = on_threads(2, run);
  EXPECT_TRUE(same_bits(one.out, two.out));
  EXPECT_TRUE(same_bits(one.lse, two.lse));
}

TEST(CpuCrossAttention, BackwardIsBitwiseTheSameOnOneAndTwoThreads) {
  const auto in = random_inputs(kThreaded, 19);
  const auto dout = random_values(out_size(kThreaded), 20);
  const auto o = options_for(kThreaded, 0.1f, {200, 77});
  const auto run = [&](CpuBackend& backend) {
    return run_backward(backend, in, dout, kThreaded, o);
  };
  const Grads one = on_threads(1, run), two = on_threads(2, run);
  EXPECT_TRUE(same_bits(one.dq, two.dq));
  EXPECT_TRUE(same_bits(one.dkv, two.dkv));
}

// --- packed self-attention, the causal mask, the score bias --------------------------------

// Fused QKV rows of four query heads over two groups (GQA): the column layout of AttentionShape.
constexpr CrossShape kPacked{
    .batch = 2, .q_seq = 9, .kv_seq = 9, .heads = 4, .groups = 2, .head_dim = 12, .packed = true};

CrossShape unpacked(CrossShape s) {
  s.packed = false;
  return s;
}

// q and kv of the unpacked layout cut out of packed qkv values.
Inputs split(const std::vector<float>& qkv, const CrossShape& s) {
  const Columns col{s};
  const int64_t d = s.head_dim;
  Inputs in;
  for (int64_t row = 0; row < s.batch * s.q_seq; ++row) {
    const auto base = qkv.begin() + row * col.q_width();
    for (int64_t h = 0; h < s.heads; ++h)
      in.q.insert(in.q.end(), base + col.query(h), base + col.query(h) + d);
    for (int64_t h = 0; h < s.heads; h += s.heads / s.groups) {
      in.kv.insert(in.kv.end(), base + col.key(h), base + col.key(h) + d);
      in.kv.insert(in.kv.end(), base + col.value(h), base + col.value(h) + d);
    }
  }
  return in;
}

// The inverse of split: unpacked dq and dkv put into the packed columns.
std::vector<float> join(const std::vector<float>& dq, const std::vector<float>& dkv,
                        const CrossShape& s) {
  const Columns col{s};
  const int64_t d = s.head_dim, per_group = s.heads / s.groups;
  std::vector<float> qkv(q_size(s));
  for (int64_t row = 0; row < s.batch * s.q_seq; ++row) {
    float* base = qkv.data() + row * col.q_width();
    for (int64_t h = 0; h < s.heads; ++h)
      std::copy_n(dq.begin() + (row * s.heads + h) * d, d, base + col.query(h));
    for (int64_t g = 0; g < s.groups; ++g) {
      const auto kv_row = dkv.begin() + (row * s.groups + g) * 2 * d;
      std::copy_n(kv_row, d, base + col.key(g * per_group));
      std::copy_n(kv_row + d, d, base + col.value(g * per_group));
    }
  }
  return qkv;
}

TEST(CpuCrossAttention, PackedLayoutEqualsTheOpOnQAndKvSplitOutOfTheSameTensor) {
  CpuBackend backend(2);
  const CrossShape separate = unpacked(kPacked);
  const auto in = random_inputs(kPacked, 21);
  const Inputs cut = split(in.q, kPacked);
  const auto dout = random_values(out_size(kPacked), 22);
  AttentionOptions o = options_for(kPacked, 0.2f, {9, 5});
  // The same values through the same f32 scratch, only gathered from (and scattered to) other
  // columns: the same bits. dq and dkv are one tensor filled with garbage first, so every
  // element of it must be written, by the right pass.
  const Result packed = run_forward(backend, in, kPacked, o);
  const Result split_out = run_forward(backend, cut, separate, o);
  EXPECT_TRUE(same_bits(packed.out, split_out.out));
  EXPECT_TRUE(same_bits(packed.lse, split_out.lse));
  const Grads got = run_backward(backend, in, dout, kPacked, o);
  const Grads want = run_backward(backend, cut, dout, separate, o);
  EXPECT_TRUE(same_bits(got.dq, join(want.dq, want.dkv, kPacked)));
}

TEST(CpuCrossAttention, CausalMaskMatchesNaiveReferenceWithQueriesAsManyAsKeys) {
  CpuBackend backend(2);
  const CrossShape s{.batch = 2, .q_seq = 7, .kv_seq = 7, .heads = 4, .groups = 2, .head_dim = 12};
  const auto in = random_inputs(s, 23);
  const auto dout = random_values(out_size(s), 24);
  AttentionOptions o = options_for(s, 0.0f, {7, 3});  // the padding mask too
  o.causal = true;
  const Result got = run_forward(backend, in, s, o);
  const Naive want = naive_forward(in.q, in.kv, s, o);
  expect_all_near(got.out, want.out, kForwardTolerance, "out");
  expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
  const Grads grads = run_backward(backend, in, dout, s, o);
  const NaiveGrads want_grads = naive_backward(in.q, in.kv, dout, s, o);
  expect_all_near(grads.dq, want_grads.dq, kBackwardTolerance, "dq");
  expect_all_near(grads.dkv, want_grads.dkv, kBackwardTolerance, "dkv");
}

// Flash self-attention over the same qkv: out, lse and (from its backward) dqkv.
struct Flash {
  std::vector<float> out, lse, dqkv;
};
Flash run_flash(CpuBackend& backend, const std::vector<float>& qkv_values,
                const std::vector<float>& dout, const AttentionShape& s,
                const AttentionOptions& o) {
  const Tensor qkv = from_floats(backend, qkv_values, {s.batch * s.seq, s.qkv_width()});
  Tensor out = backend.empty({s.batch * s.seq, s.heads * s.head_dim}, DType::F32);
  Tensor lse = backend.empty({s.batch, s.heads, s.seq}, DType::F32);
  backend.attention_forward(qkv, s, o, out, lse);
  const Tensor dy = from_floats(backend, dout, out.shape());
  Tensor dqkv = backend.empty(qkv.shape(), DType::F32);
  backend.attention_backward(qkv, out, dy, lse, s, o, dqkv);
  return {to_floats(backend, out), to_floats(backend, lse), to_floats(backend, dqkv)};
}

std::vector<double> as_doubles(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// Both compute in f32 in different orders, each within kForwardTolerance (kBackwardTolerance) of
// the double result: twice that apart at most. A probability masked or dropped by one and not by
// the other would move an output by ~0.1.
void expect_flash_equal(const CrossShape& s, const AttentionOptions& o, uint32_t seed) {
  CpuBackend backend(2);
  const auto in = random_inputs(s, seed);
  const auto dout = random_values(out_size(s), seed + 1);
  const Flash want = run_flash(backend, in.q, dout, Columns{s}.self(), o);
  const Result got = run_forward(backend, in, s, o);
  expect_all_near(got.out, as_doubles(want.out), 2 * kForwardTolerance, "out");
  expect_all_near(got.lse, as_doubles(want.lse), 2 * kLseTolerance, "lse");
  const Grads grads = run_backward(backend, in, dout, s, o);
  expect_all_near(grads.dq, as_doubles(want.dqkv), 2 * kBackwardTolerance, "dqkv");
}

TEST(CpuCrossAttention, CausalPackedEqualsCausalFlashSelfAttention) {
  AttentionOptions o = options_for(kPacked);
  o.causal = true;
  expect_flash_equal(kPacked, o, 25);
}

TEST(CpuCrossAttention, CausalPackedDropsAndMasksAsCausalFlashSelfAttention) {
  // q_seq == kv_seq: the dropout index ((b * total_heads + head_offset + h) * seq + i) * seq + j
  // is the flash op's, so a tensor-parallel rank's share must drop the same probabilities.
  AttentionOptions o = options_for(kPacked, 0.3f, {9, 4});
  o.causal = true;
  o.head_offset = 2;
  o.total_heads = 8;
  expect_flash_equal(kPacked, o, 27);
}

// A tensor-parallel rank's share of a T5 relative position bias: its heads are columns
// offset..offset + heads - 1 of `columns`. Values of magnitude ~2, as learned T5 biases are.
struct Bias {
  Tensor tensor;
  std::vector<float> values;
  int64_t columns = 0, offset = 0;

  Bias(CpuBackend& backend, const CrossShape& s, int64_t columns_, int64_t offset_, uint32_t seed)
      : values(random_values(size_t(s.q_seq * s.kv_seq * columns_), seed, 2.0f)),
        columns(columns_),
        offset(offset_) {
    tensor = from_floats(backend, values, {s.q_seq, s.kv_seq, columns});
  }
  AttentionOptions options(AttentionOptions o) const {
    o.bias = &tensor;
    o.bias_columns = columns;
    o.bias_offset = offset;
    return o;
  }
};

// Biased scores of magnitude ~5 rather than ~3: the same f32 rounding relative to the larger
// exponents, well inside the tolerances above.
TEST(CpuCrossAttention, BiasIsAddedToTheScaledScoresOfEachHeadsColumn) {
  CpuBackend backend(2);
  for (const bool packed_causal : {false, true}) {
    SCOPED_TRACE(packed_causal ? "packed, causal" : "cross-attention");
    const CrossShape s = packed_causal ? kPacked : kFewerQueries;
    const Bias bias(backend, s, 7, 2, 31);  // heads 2..5 of 7
    AttentionOptions o = bias.options(options_for(s, 0.2f, {s.kv_seq, 4}));
    o.causal = packed_causal;
    const auto in = random_inputs(s, 32);
    const Result got = run_forward(backend, in, s, o);
    const Naive want = naive_forward(in.q, in.kv, s, o);
    expect_all_near(got.out, want.out, kForwardTolerance / 0.8, "out");  // kept: 1 / 0.8
    expect_all_near(got.lse, want.lse, kLseTolerance, "lse");
  }
}

TEST(CpuCrossAttention, BiasBackwardAccumulatesTheBatchsScoreGradientsOntoDbias) {
  CpuBackend backend(2);
  for (const bool packed_causal : {false, true}) {
    SCOPED_TRACE(packed_causal ? "packed, causal" : "cross-attention");
    const CrossShape s = packed_causal ? kPacked : kMoreQueries;
    const Bias bias(backend, s, 7, 3, 33);  // heads 3..6 of 7
    AttentionOptions o = bias.options(options_for(s, 0.3f, {s.kv_seq, 4}));
    o.causal = packed_causal;
    const auto in = random_inputs(s, 34);
    const auto dout = random_values(out_size(s), 35);
    const auto start = random_values(bias.values.size(), 36);
    const Grads got = run_backward(backend, in, dout, s, o, DType::F32, start);
    const NaiveGrads want = naive_backward(in.q, in.kv, dout, s, o);
    if (s.packed) {
      expect_all_near(got.dq, packed(want), kBackwardTolerance, "dqkv");
    } else {
      expect_all_near(got.dq, want.dq, kBackwardTolerance, "dq");
      expect_all_near(got.dkv, want.dkv, kBackwardTolerance, "dkv");
    }
    // dS sums two sequences' terms of magnitude ~1 onto a start of ~1: f32 rounding ~1e-7.
    std::vector<double> accumulated(start.size());
    for (size_t i = 0; i < start.size(); ++i) accumulated[i] = double(start[i]) + want.dbias[i];
    expect_all_near(got.dbias, accumulated, kBackwardTolerance, "dbias");
    // The columns of the other ranks' heads are untouched, bit for bit.
    for (size_t i = 0; i < start.size(); ++i) {
      const int64_t column = int64_t(i) % bias.columns;
      if (column < bias.offset || column >= bias.offset + s.heads) {
        ASSERT_EQ(std::memcmp(&got.dbias[i], &start[i], sizeof(float)), 0) << "dbias[" << i << "]";
      }
    }
  }
}

TEST(CpuCrossAttention, BiasGradientMatchesNumericGradientOfAWeightedSumOfTheOutput) {
  CpuBackend backend(1);
  const CrossShape s{
      .batch = 2, .q_seq = 4, .kv_seq = 4, .heads = 2, .groups = 1, .head_dim = 3, .packed = true};
  const Bias bias(backend, s, 3, 1, 37);  // heads 1, 2 of 3: column 0 has no gradient
  AttentionOptions o = bias.options(options_for(s, 0.0f, {4, 3}));
  o.causal = true;
  const auto in = random_inputs(s, 38);
  const auto weights = random_values(out_size(s), 39);
  const Grads got = run_backward(backend, in, weights, s, o);
  const auto numeric = numeric_gradient(
      bias.values,
      [&](const std::vector<float>& values) {
        const Tensor other = from_floats(backend, values, bias.tensor.shape());
        AttentionOptions moved = o;
        moved.bias = &other;
        return run_forward(backend, in, s, moved).out;
      },
      weights);
  // As check_gradient's: central differences in f32 with eps 1e-2.
  expect_gradient_near(got.dbias, numeric, 2e-3, 1e-4, "dbias");
}

TEST(CpuCrossAttention, CausalPackedBiasedBackwardMatchesNumericGradientOfTheQkv) {
  CpuBackend backend(1);
  const CrossShape s{
      .batch = 2, .q_seq = 4, .kv_seq = 4, .heads = 2, .groups = 1, .head_dim = 3, .packed = true};
  const Bias bias(backend, s, 2, 0, 40);
  AttentionOptions o = bias.options(options_for(s, 0.0f, {4, 3}));
  o.causal = true;
  check_gradient(s, o);
}

// Large enough that both passes run on the team: packed, causal, dropout, a mask and a bias.
constexpr CrossShape kThreadedPacked{.batch = 2,
                                     .q_seq = 128,
                                     .kv_seq = 128,
                                     .heads = 4,
                                     .groups = 2,
                                     .head_dim = 64,
                                     .packed = true};

TEST(CpuCrossAttention, BiasGradientIsBitwiseTheSameOnOneAndTwoThreads) {
  CpuBackend owner(1);
  const Bias bias(owner, kThreadedPacked, 6, 1, 41);
  AttentionOptions o = bias.options(options_for(kThreadedPacked, 0.1f, {128, 77}));
  o.causal = true;
  const auto in = random_inputs(kThreadedPacked, 42);
  const auto dout = random_values(out_size(kThreadedPacked), 43);
  const auto start = random_values(bias.values.size(), 44);
  const auto forward = [&](CpuBackend& backend) {
    return run_forward(backend, in, kThreadedPacked, o);
  };
  const Result one = on_threads(1, forward), two = on_threads(2, forward);
  EXPECT_TRUE(same_bits(one.out, two.out));
  EXPECT_TRUE(same_bits(one.lse, two.lse));
  const auto backward = [&](CpuBackend& backend) {
    return run_backward(backend, in, dout, kThreadedPacked, o, DType::F32, start);
  };
  const Grads g1 = on_threads(1, backward), g2 = on_threads(2, backward);
  EXPECT_TRUE(same_bits(g1.dq, g2.dq));
  EXPECT_TRUE(same_bits(g1.dbias, g2.dbias));
}

// --- refusals: each a std::logic_error before any work --------------------------------------

struct Args {
  Tensor q, kv, out, lse;
};

Args args_for(CpuBackend& backend, const CrossShape& s, DType dtype = DType::F32) {
  return {backend.zeros({s.batch * s.q_seq, s.heads * s.head_dim}, dtype),
          backend.zeros({s.batch * s.kv_seq, 2 * s.groups * s.head_dim}, dtype),
          backend.empty({s.batch * s.q_seq, s.heads * s.head_dim}, dtype),
          backend.empty({s.batch, s.heads, s.q_seq}, DType::F32)};
}

constexpr CrossShape kSmall{
    .batch = 2, .q_seq = 3, .kv_seq = 4, .heads = 2, .groups = 1, .head_dim = 4};

TEST(CpuCrossAttention, RefusesACausalMaskOverMoreKeysThanQueries) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  AttentionOptions o = options_for(kSmall);
  o.causal = true;
  EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse),
               std::logic_error);
  Tensor dq = backend.empty(a.q.shape(), DType::F32), dkv = backend.empty(a.kv.shape(), DType::F32);
  EXPECT_THROW(
      backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, o, dq, dkv, nullptr),
      std::logic_error);
}

TEST(CpuCrossAttention, RefusesKeyLengthsOutsideTheKeysOrOfAnotherBatch) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  for (const std::vector<int64_t>& keys :
       std::vector<std::vector<int64_t>>{{4}, {0, 4}, {5, 4}, {4, -1}, {4, 4, 4}}) {
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, options_for(kSmall, 0, keys),
                                                 a.out, a.lse),
                 std::logic_error)
        << keys.size() << " lengths, first " << keys[0];
  }
}

TEST(CpuCrossAttention, RefusesTensorsThatDoNotMatchTheShape) {
  CpuBackend backend(1);
  const auto o = options_for(kSmall);
  CrossShape more_keys = kSmall;
  more_keys.kv_seq = 5;
  CrossShape wider = kSmall;
  wider.head_dim = 5;
  {  // kv of 4 keys for a shape of 5
    Args a = args_for(backend, kSmall);
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, more_keys, o, a.out, a.lse),
                 std::logic_error);
  }
  {  // q, kv and out all of another head_dim
    Args a = args_for(backend, kSmall);
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, wider, o, a.out, a.lse),
                 std::logic_error);
  }
  {  // lse of another dtype
    Args a = args_for(backend, kSmall);
    a.lse = backend.empty(a.lse.shape(), DType::Bf16);
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse),
                 std::logic_error);
  }
  {  // kv of another dtype than q
    Args a = args_for(backend, kSmall);
    a.kv = backend.zeros(a.kv.shape(), DType::Bf16);
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse),
                 std::logic_error);
  }
  {  // a dkv of q's shape
    Args a = args_for(backend, kSmall);
    backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse);
    Tensor dq = backend.empty(a.q.shape(), DType::F32),
           dkv = backend.empty(a.q.shape(), DType::F32);
    EXPECT_THROW(backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, o, dq,
                                                  dkv, nullptr),
                 std::logic_error);
  }
}

TEST(CpuCrossAttention, RefusesHeadsThatDoNotSplitIntoGroups) {
  CpuBackend backend(1);
  const CrossShape s{.batch = 1, .q_seq = 2, .kv_seq = 2, .heads = 3, .groups = 2, .head_dim = 4};
  Args a = args_for(backend, s);
  EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, s, options_for(s), a.out, a.lse),
               std::logic_error);
}

TEST(CpuCrossAttention, RefusesAPackedShapeWithFewerQueriesThanKeys) {
  CpuBackend backend(1);
  CrossShape s = kSmall;  // 3 queries, 4 keys
  s.packed = true;
  const Tensor qkv = backend.zeros({s.batch * s.q_seq, Columns{s}.q_width()}, DType::F32);
  Tensor out = backend.empty({s.batch * s.q_seq, s.heads * s.head_dim}, DType::F32);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  EXPECT_THROW(backend.cross_attention_forward(qkv, qkv, s, options_for(s), out, lse),
               std::logic_error);
}

// Packed shapes of 3 tokens a sequence.
constexpr CrossShape kSmallPacked{
    .batch = 2, .q_seq = 3, .kv_seq = 3, .heads = 2, .groups = 1, .head_dim = 4, .packed = true};

TEST(CpuCrossAttention, PackedRefusesSeparateQAndKvOrSeparateGradients) {
  CpuBackend backend(1);
  const CrossShape& s = kSmallPacked;
  const Shape rows{s.batch * s.q_seq, Columns{s}.q_width()};
  const Tensor qkv = backend.zeros(rows, DType::F32), copy = backend.zeros(rows, DType::F32);
  Tensor out = backend.empty({s.batch * s.q_seq, s.heads * s.head_dim}, DType::F32);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  const auto o = options_for(s);
  EXPECT_THROW(backend.cross_attention_forward(qkv, copy, s, o, out, lse), std::logic_error);
  backend.cross_attention_forward(qkv, qkv, s, o, out, lse);
  Tensor dq = backend.empty(rows, DType::F32), dkv = backend.empty(rows, DType::F32);
  EXPECT_THROW(backend.cross_attention_backward(qkv, qkv, out, out, lse, s, o, dq, dkv, nullptr),
               std::logic_error);
  EXPECT_NO_THROW(backend.cross_attention_backward(qkv, qkv, out, out, lse, s, o, dq, dq, nullptr));
}

TEST(CpuCrossAttention, RefusesOverlappingDqAndDkvWhenNotPacked) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  const auto o = options_for(kSmall);
  backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse);
  // dkv's 64 elements and dq's 48 share 16.
  Tensor both = backend.empty({a.q.numel() + a.kv.numel() - 16}, DType::F32);
  Tensor dkv = both.slice(0, a.kv.numel()), dq = both.slice(a.kv.numel() - 16, both.numel());
  EXPECT_THROW(
      backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, o, dq, dkv, nullptr),
      std::logic_error);
}

TEST(CpuCrossAttention, RefusesBiasColumnsOutsideTheBiasAndABiasOfAnotherShapeOrDtype) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  const Tensor bias = backend.zeros({kSmall.q_seq, kSmall.kv_seq, 3}, DType::F32);
  const Tensor short_bias = backend.zeros({kSmall.q_seq, kSmall.kv_seq - 1, 3}, DType::F32);
  const Tensor bf16_bias = backend.zeros(bias.shape(), DType::Bf16);
  AttentionOptions o = options_for(kSmall);
  o.bias_columns = 3;
  for (const auto& [tensor, offset] : std::vector<std::pair<const Tensor*, int64_t>>{
           {&bias, 2}, {&bias, -1}, {&short_bias, 0}, {&bf16_bias, 0}}) {
    o.bias = tensor;
    o.bias_offset = offset;  // 2 heads: offsets 0 and 1 fit 3 columns
    EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse),
                 std::logic_error)
        << "offset " << offset;
  }
  o.bias = &bias;
  o.bias_offset = 1;
  EXPECT_NO_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse));
}

TEST(CpuCrossAttention, BackwardRefusesABiasWithoutAFittingDbiasAndADbiasWithoutABias) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  const Tensor bias = backend.zeros({kSmall.q_seq, kSmall.kv_seq, 2}, DType::F32);
  AttentionOptions o = options_for(kSmall);
  const AttentionOptions plain = o;
  o.bias = &bias;
  o.bias_columns = 2;
  backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse);
  Tensor dq = backend.empty(a.q.shape(), DType::F32), dkv = backend.empty(a.kv.shape(), DType::F32);
  const auto backward = [&](const AttentionOptions& options, Tensor* dbias) {
    backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, options, dq, dkv,
                                     dbias);
  };
  EXPECT_THROW(backward(o, nullptr), std::logic_error);
  Tensor flat = backend.zeros({bias.numel()}, DType::F32);  // another shape, the same numel
  EXPECT_THROW(backward(o, &flat), std::logic_error);
  Tensor bf16 = backend.zeros(bias.shape(), DType::Bf16);
  EXPECT_THROW(backward(o, &bf16), std::logic_error);
  Tensor dbias = backend.zeros(bias.shape(), DType::F32);
  EXPECT_THROW(backward(plain, &dbias), std::logic_error);
  EXPECT_NO_THROW(backward(o, &dbias));
}

TEST(CpuCrossAttention, FlashAttentionRefusesABias) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 1, .seq = 4, .heads = 2, .groups = 1, .head_dim = 4};
  const Tensor qkv = backend.zeros({s.seq, s.qkv_width()}, DType::F32);
  Tensor out = backend.empty({s.seq, s.heads * s.head_dim}, DType::F32);
  Tensor lse = backend.empty({s.batch, s.heads, s.seq}, DType::F32);
  Tensor dqkv = backend.empty(qkv.shape(), DType::F32);
  const Tensor bias = backend.zeros({s.seq, s.seq, s.heads}, DType::F32);
  AttentionOptions o{.scale = 0.5f};
  backend.attention_forward(qkv, s, o, out, lse);
  o.bias = &bias;
  o.bias_columns = s.heads;
  EXPECT_THROW(backend.attention_forward(qkv, s, o, out, lse), std::logic_error);
  EXPECT_THROW(backend.attention_backward(qkv, out, out, lse, s, o, dqkv), std::logic_error);
}

}  // namespace cpu_cross_attention_test
}  // namespace megatron::tensor
