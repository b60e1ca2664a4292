// CpuBackend cross-attention (T5's decoder over the encoder output) against a naive double
// softmax(scale q k^T) v written here from the documented layouts, its backward against that
// reference's textbook backward and central differences, and its dropout against self-attention's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/random.hpp"
#include "tensor/scoped_threads.hpp"

namespace megatron::tensor {
namespace {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;
using test_support::ScopedThreads;

using CrossShape = CrossAttentionShape;

size_t q_size(const CrossShape& s) { return size_t(s.batch * s.q_seq * s.heads * s.head_dim); }
size_t kv_size(const CrossShape& s) {
  return size_t(s.batch * s.kv_seq * 2 * s.groups * s.head_dim);
}

// Element (row, column) of a row-major matrix `width` wide.
size_t at(int64_t row, int64_t width, int64_t column) { return size_t(row * width + column); }

// Where the reference reads: q head h at h * head_dim; group g's key at 2 g head_dim, value next.
struct Columns {
  const CrossShape& s;
  int64_t q_width() const { return s.heads * s.head_dim; }
  int64_t kv_width() const { return 2 * s.groups * s.head_dim; }
  int64_t group(int64_t h) const { return h / (s.heads / s.groups); }
  int64_t key(int64_t h) const { return 2 * group(h) * s.head_dim; }
  int64_t value(int64_t h) const { return key(h) + s.head_dim; }
};

int64_t keys_of(const CrossShape& s, const AttentionOptions& o, int64_t b) {
  return o.key_lengths.empty() ? s.kv_seq : o.key_lengths[size_t(b)];
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
  const int64_t keys = keys_of(s, o, b);
  std::vector<double> p(size_t(s.kv_seq), 0.0);
  double max = -INFINITY;
  for (int64_t j = 0; j < keys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      dot += double(q[at(b * s.q_seq + i, col.q_width(), h * s.head_dim + d)]) *
             double(kv[at(b * s.kv_seq + j, col.kv_width(), col.key(h) + d)]);
    }
    p[size_t(j)] = double(o.scale) * dot;
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
  Naive f{std::vector<double>(q_size(s)), std::vector<double>(size_t(s.batch * s.heads * s.q_seq))};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_seq; ++i) {
        double lse = 0.0;
        const auto p = probabilities(q, kv, s, o, b, h, i, &lse);
        f.lse[size_t((b * s.heads + h) * s.q_seq + i)] = lse;
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double w = p[size_t(j)] * dropout_factor(s, o, b, h, i, j);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            f.out[at(b * s.q_seq + i, col.q_width(), h * s.head_dim + d)] +=
                w * double(kv[at(b * s.kv_seq + j, col.kv_width(), col.value(h) + d)]);
          }
        }
      }
  return f;
}

struct NaiveGrads {
  std::vector<double> dq, dkv;
};

// The textbook backward: dV = P~^T dO, dP~ = dO V^T, dP = dP~ * dropout, dS = P * (dP -
// rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q.
NaiveGrads naive_backward(const std::vector<float>& q, const std::vector<float>& kv,
                          const std::vector<float>& dout, const CrossShape& s,
                          const AttentionOptions& o) {
  const Columns col{s};
  NaiveGrads g{std::vector<double>(q.size()), std::vector<double>(kv.size())};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_seq; ++i) {
        const auto p = probabilities(q, kv, s, o, b, h, i, nullptr);
        const size_t q_row = at(b * s.q_seq + i, col.q_width(), h * s.head_dim);
        std::vector<double> dp(size_t(s.kv_seq), 0.0);
        double row_dot = 0.0;
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double z = dropout_factor(s, o, b, h, i, j);
          const size_t v_row = at(b * s.kv_seq + j, col.kv_width(), col.value(h));
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            const double gd = dout[q_row + size_t(d)];
            dot += gd * double(kv[v_row + size_t(d)]);
            g.dkv[v_row + size_t(d)] += p[size_t(j)] * z * gd;
          }
          dp[size_t(j)] = dot * z;
          row_dot += p[size_t(j)] * dp[size_t(j)];
        }
        for (int64_t j = 0; j < s.kv_seq; ++j) {
          const double ds = double(o.scale) * p[size_t(j)] * (dp[size_t(j)] - row_dot);
          const size_t k_row = at(b * s.kv_seq + j, col.kv_width(), col.key(h));
          for (int64_t d = 0; d < s.head_dim; ++d) {
            g.dq[q_row + size_t(d)] += ds * double(kv[k_row + size_t(d)]);
            g.dkv[k_row + size_t(d)] += ds * double(q[q_row + size_t(d)]);
          }
        }
      }
  return g;
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
  std::vector<float> q, kv;
};

Inputs random_inputs(const CrossShape& s, uint32_t seed) {
  return {random_values(q_size(s), seed), random_values(kv_size(s), seed + 1000)};
}

// Rounds every value to bf16 (or f16), so that the double reference sees what the op sees.
void round_to(DType dtype, std::vector<float>& values) {
  for (float& x : values) x = dtype == DType::Bf16 ? to_float(to_bf16(x)) : to_float(to_f16(x));
}

struct Result {
  std::vector<float> out, lse;
};

Result run_forward(CpuBackend& backend, const Inputs& in, const CrossShape& s,
                   const AttentionOptions& o, DType dtype = DType::F32) {
  const Tensor q = from_floats(backend, in.q, {s.batch * s.q_seq, s.heads * s.head_dim}, dtype);
  const Tensor kv =
      from_floats(backend, in.kv, {s.batch * s.kv_seq, 2 * s.groups * s.head_dim}, dtype);
  Tensor out = backend.empty(q.shape(), dtype);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  backend.cross_attention_forward(q, kv, s, o, out, lse);
  return {to_floats(backend, out), to_floats(backend, lse)};
}

struct Grads {
  std::vector<float> dq, dkv;
};

// The forward then the backward with dL/dout = dout, all tensors of `dtype`.
Grads run_backward(CpuBackend& backend, const Inputs& in, const std::vector<float>& dout,
                   const CrossShape& s, const AttentionOptions& o, DType dtype = DType::F32) {
  const Tensor q = from_floats(backend, in.q, {s.batch * s.q_seq, s.heads * s.head_dim}, dtype);
  const Tensor kv =
      from_floats(backend, in.kv, {s.batch * s.kv_seq, 2 * s.groups * s.head_dim}, dtype);
  Tensor out = backend.empty(q.shape(), dtype);
  Tensor lse = backend.empty({s.batch, s.heads, s.q_seq}, DType::F32);
  backend.cross_attention_forward(q, kv, s, o, out, lse);
  const Tensor dy = from_floats(backend, dout, q.shape(), dtype);
  Tensor dq = backend.empty(q.shape(), dtype);
  Tensor dkv = backend.empty(kv.shape(), dtype);
  // Garbage first: the gradients must be overwritten, masked keys' rows included.
  backend.fill(dq, 123.0);
  backend.fill(dkv, 123.0);
  backend.cross_attention_backward(q, kv, out, dy, lse, s, o, dq, dkv);
  return {to_floats(backend, dq), to_floats(backend, dkv)};
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
    const auto dout = random_values(q_size(s), 10);
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
    const auto dout = random_values(q_size(s), 12);
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
  auto dout = random_values(q_size(s), 14);
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
// (~1); a missing term, a wrong mask or a wrong group is off by far more.
void check_gradient(const CrossShape& s, const AttentionOptions& o) {
  CpuBackend backend(1);
  const auto in = random_inputs(s, 15);
  const auto weights = random_values(q_size(s), 16);
  const Grads got = run_backward(backend, in, weights, s, o);
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
  const auto dout = random_values(q_size(kThreaded), 20);
  const auto o = options_for(kThreaded, 0.1f, {200, 77});
  const auto run = [&](CpuBackend& backend) {
    return run_backward(backend, in, dout, kThreaded, o);
  };
  const Grads one = on_threads(1, run), two = on_threads(2, run);
  EXPECT_TRUE(same_bits(one.dq, two.dq));
  EXPECT_TRUE(same_bits(one.dkv, two.dkv));
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

TEST(CpuCrossAttention, RefusesACausalMask) {
  CpuBackend backend(1);
  Args a = args_for(backend, kSmall);
  AttentionOptions o = options_for(kSmall);
  o.causal = true;
  EXPECT_THROW(backend.cross_attention_forward(a.q, a.kv, kSmall, o, a.out, a.lse),
               std::logic_error);
  Tensor dq = backend.empty(a.q.shape(), DType::F32), dkv = backend.empty(a.kv.shape(), DType::F32);
  EXPECT_THROW(backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, o, dq, dkv),
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
    EXPECT_THROW(
        backend.cross_attention_backward(a.q, a.kv, a.out, a.out, a.lse, kSmall, o, dq, dkv),
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

}  // namespace
}  // namespace megatron::tensor
