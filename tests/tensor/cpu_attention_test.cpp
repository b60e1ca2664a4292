// CpuBackend flash attention against a naive softmax(scale q k^T) v over the whole score matrix
// in double, and its backward against central differences and a naive double backward.
// Sequence lengths are chosen to cross the backend's 64-row blocks and to end inside one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "support/packed_documents.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace cpu_attention_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

// Where heads live in a fused qkv row: per group, its query heads, then its key, then its value.
struct Columns {
  const AttentionShape& s;
  int64_t per_group() const { return s.heads / s.groups; }
  int64_t query(int64_t h) const {
    return ((h / per_group()) * (per_group() + 2) + h % per_group()) * s.head_dim;
  }
  int64_t key(int64_t h) const {
    return ((h / per_group()) * (per_group() + 2) + per_group()) * s.head_dim;
  }
  int64_t value(int64_t h) const { return key(h) + s.head_dim; }
};

size_t at(int64_t row, int64_t width, int64_t column) {
  return static_cast<size_t>(row * width + column);
}

// The dropout multiplier of probability (b, h, i, j), straight from the documented index.
double dropout_factor(const AttentionShape& s, const AttentionOptions& o, int64_t b, int64_t h,
                      int64_t i, int64_t j) {
  if (o.dropout == 0.0f) return 1.0;
  const auto index = static_cast<uint64_t>(((b * s.heads + h) * s.seq + i) * s.seq + j);
  return uniform_at(o.rng, index) >= o.dropout ? 1.0 / (1.0 - double(o.dropout)) : 0.0;
}

// Softmax probabilities (undropped) of row i of head (b, h) over all keys, masked ones 0.
std::vector<double> probabilities(const std::vector<float>& qkv, const AttentionShape& s,
                                  const AttentionOptions& o, int64_t b, int64_t h, int64_t i,
                                  double* lse) {
  const Columns col{s};
  const int64_t width = s.qkv_width();
  std::vector<double> p(static_cast<size_t>(s.seq), 0.0);
  const int64_t keys = o.key_lengths.empty() ? s.seq : o.key_lengths[static_cast<size_t>(b)];
  const int64_t end = std::min(o.causal ? i + 1 : s.seq, keys);
  const int64_t start = o.first_keys.empty() ? 0 : o.first_keys[static_cast<size_t>(b * s.seq + i)];
  double max = -INFINITY;
  for (int64_t j = start; j < end; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      dot += double(qkv[at(b * s.seq + i, width, col.query(h) + d)]) *
             double(qkv[at(b * s.seq + j, width, col.key(h) + d)]);
    }
    p[static_cast<size_t>(j)] = double(o.scale) * dot;
    max = std::max(max, p[static_cast<size_t>(j)]);
  }
  double sum = 0.0;
  for (int64_t j = start; j < end; ++j) sum += std::exp(p[static_cast<size_t>(j)] - max);
  for (int64_t j = start; j < end; ++j) {
    p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max) / sum;
  }
  if (lse) *lse = max + std::log(sum);
  return p;
}

struct Forward {
  std::vector<double> out;  // [batch * seq, heads * head_dim]
  std::vector<double> lse;  // [batch, heads, seq]
};

Forward naive_forward(const std::vector<float>& qkv, const AttentionShape& s,
                      const AttentionOptions& o) {
  const Columns col{s};
  const int64_t width = s.qkv_width(), out_width = s.heads * s.head_dim;
  Forward f{std::vector<double>(static_cast<size_t>(s.batch * s.seq * out_width)),
            std::vector<double>(static_cast<size_t>(s.batch * s.heads * s.seq))};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        double lse = 0.0;
        const auto p = probabilities(qkv, s, o, b, h, i, &lse);
        f.lse[static_cast<size_t>((b * s.heads + h) * s.seq + i)] = lse;
        for (int64_t j = 0; j < s.seq; ++j) {
          const double w = p[static_cast<size_t>(j)] * dropout_factor(s, o, b, h, i, j);
          if (w == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            f.out[at(b * s.seq + i, out_width, h * s.head_dim + d)] +=
                w * double(qkv[at(b * s.seq + j, width, col.value(h) + d)]);
          }
        }
      }
  return f;
}

// The textbook backward over full matrices: dV = P~^T dO, dP~ = dO V^T, dP = dP~ * dropout,
// dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q.
std::vector<double> naive_backward(const std::vector<float>& qkv, const std::vector<float>& dout,
                                   const AttentionShape& s, const AttentionOptions& o) {
  const Columns col{s};
  const int64_t width = s.qkv_width(), out_width = s.heads * s.head_dim;
  std::vector<double> dqkv(qkv.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const auto p = probabilities(qkv, s, o, b, h, i, nullptr);
        std::vector<double> dp(static_cast<size_t>(s.seq), 0.0);
        double row_dot = 0.0;
        for (int64_t j = 0; j < s.seq; ++j) {
          const double z = dropout_factor(s, o, b, h, i, j);
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            const double g = dout[at(b * s.seq + i, out_width, h * s.head_dim + d)];
            dot += g * double(qkv[at(b * s.seq + j, width, col.value(h) + d)]);
            dqkv[at(b * s.seq + j, width, col.value(h) + d)] += p[static_cast<size_t>(j)] * z * g;
          }
          dp[static_cast<size_t>(j)] = dot * z;
          row_dot += p[static_cast<size_t>(j)] * dp[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < s.seq; ++j) {
          const double ds =
              double(o.scale) * p[static_cast<size_t>(j)] * (dp[static_cast<size_t>(j)] - row_dot);
          if (ds == 0.0) continue;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dqkv[at(b * s.seq + i, width, col.query(h) + d)] +=
                ds * double(qkv[at(b * s.seq + j, width, col.key(h) + d)]);
            dqkv[at(b * s.seq + j, width, col.key(h) + d)] +=
                ds * double(qkv[at(b * s.seq + i, width, col.query(h) + d)]);
          }
        }
      }
  return dqkv;
}

// Every |got - want| within tolerance + relative * |want|.
template <typename Want>
void expect_all_near(const std::vector<float>& got, const Want& want, double tolerance,
                     const char* what, double relative = 0.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tolerance + relative * std::abs(double(want[i]));
    if (!(std::abs(double(got[i]) - double(want[i])) <= bound) && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << got.size() << " off";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

AttentionOptions options_for(const AttentionShape& s, bool causal, float dropout = 0.0f) {
  return {.scale = 1.0f / std::sqrt(float(s.head_dim)),
          .causal = causal,
          .dropout = dropout,
          .rng = {.seed = 1234, .stream = 77}};
}

struct Result {
  std::vector<float> out, lse;
};

Result run_forward(CpuBackend& backend, const std::vector<float>& qkv, const AttentionShape& s,
                   const AttentionOptions& o, DType dtype = DType::F32) {
  const Tensor x = from_floats(backend, qkv, {s.batch * s.seq, s.qkv_width()}, dtype);
  Tensor out = backend.empty({s.batch * s.seq, s.heads * s.head_dim}, dtype);
  Tensor lse = backend.empty({s.batch, s.heads, s.seq}, DType::F32);
  backend.attention_forward(x, s, o, out, lse);
  return {to_floats(backend, out), to_floats(backend, lse)};
}

std::vector<float> run_backward(CpuBackend& backend, const std::vector<float>& qkv,
                                const std::vector<float>& dout, const AttentionShape& s,
                                const AttentionOptions& o) {
  const Result f = run_forward(backend, qkv, s, o);
  const Tensor x = from_floats(backend, qkv, {s.batch * s.seq, s.qkv_width()});
  const Tensor out = from_floats(backend, f.out, {s.batch * s.seq, s.heads * s.head_dim});
  const Tensor lse = from_floats(backend, f.lse, {s.batch, s.heads, s.seq});
  const Tensor dy = from_floats(backend, dout, out.shape());
  Tensor dx = backend.empty(x.shape(), DType::F32);
  backend.attention_backward(x, out, dy, lse, s, o, dx);
  return to_floats(backend, dx);
}

std::vector<float> random_qkv(const AttentionShape& s, uint32_t seed) {
  return random_values(static_cast<size_t>(s.batch * s.seq * s.qkv_width()), seed);
}

size_t out_size(const AttentionShape& s) {
  return static_cast<size_t>(s.batch * s.seq * s.heads * s.head_dim);
}

// The outputs are convex combinations of values of magnitude ~1, computed in f32 from scores
// of magnitude ~5: f32 rounding leaves them within ~1e-6 of the double result.
constexpr double kForwardTolerance = 5e-6;

// Central differences in f32 with eps 1e-2 over a few hundred weighted outputs: the numeric
// gradient carries noise of ~1e-4 (hence that absolute tolerance) and curvature error of
// ~eps^2, both within 0.2% of the largest gradient (~1); a missing term or a wrong mask is
// off by far more.
constexpr double kGradientRtol = 2e-3;
constexpr double kGradientAtol = 1e-4;

void check_gradient(const AttentionShape& s, const AttentionOptions& o) {
  CpuBackend backend(2);
  const auto qkv = random_qkv(s, 11);
  const auto weights = random_values(out_size(s), 12);
  const auto numeric = numeric_gradient(
      qkv, [&](const std::vector<float>& x) { return run_forward(backend, x, s, o).out; }, weights);
  expect_gradient_near(run_backward(backend, qkv, weights, s, o), numeric, kGradientRtol,
                       kGradientAtol, "dqkv");
}

TEST(CpuAttention, CausalForwardMatchesNaiveSoftmax) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 150, .heads = 3, .groups = 3, .head_dim = 64};
  const auto qkv = random_qkv(s, 1);
  const auto o = options_for(s, true);
  expect_all_near(run_forward(backend, qkv, s, o).out, naive_forward(qkv, s, o).out,
                  kForwardTolerance, "out");
}

TEST(CpuAttention, UnmaskedForwardMatchesNaiveSoftmax) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 130, .heads = 2, .groups = 2, .head_dim = 32};
  const auto qkv = random_qkv(s, 2);
  const auto o = options_for(s, false);
  expect_all_near(run_forward(backend, qkv, s, o).out, naive_forward(qkv, s, o).out,
                  kForwardTolerance, "out");
}

TEST(CpuAttention, GroupedQueryHeadsShareTheirGroupsKeysAndValues) {
  // head_dim 40 is not a multiple of 16 (an AVX-512 vector of floats): the channels the backend
  // pads its scratch with must stay out of the result.
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 100, .heads = 6, .groups = 2, .head_dim = 40};
  const auto qkv = random_qkv(s, 3);
  const auto o = options_for(s, true);
  expect_all_near(run_forward(backend, qkv, s, o).out, naive_forward(qkv, s, o).out,
                  kForwardTolerance, "out");
}

TEST(CpuAttention, SavesLogSumExpOfEachScaledScoreRow) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 90, .heads = 4, .groups = 2, .head_dim = 16};
  const auto qkv = random_qkv(s, 4);
  for (bool causal : {true, false}) {
    const auto o = options_for(s, causal);
    // lse ~ log(seq) + max score ~ 6, to f32 precision plus the exp's few ulp.
    expect_all_near(run_forward(backend, qkv, s, o).lse, naive_forward(qkv, s, o).lse, 5e-6,
                    causal ? "causal lse" : "lse");
  }
}

TEST(CpuAttention, DropoutForwardMatchesReferenceWithTheSameMask) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 100, .heads = 4, .groups = 2, .head_dim = 24};
  const auto qkv = random_qkv(s, 5);
  const auto o = options_for(s, true, 0.25f);
  // Kept probabilities are scaled by 4/3, so the tolerance grows with them.
  expect_all_near(run_forward(backend, qkv, s, o).out, naive_forward(qkv, s, o).out,
                  kForwardTolerance * 4 / 3, "out");
}

TEST(CpuAttention, DropoutActuallyDropsProbabilities) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 1, .seq = 80, .heads = 2, .groups = 1, .head_dim = 16};
  const auto qkv = random_qkv(s, 6);
  const auto with = run_forward(backend, qkv, s, options_for(s, false, 0.5f)).out;
  const auto without = run_forward(backend, qkv, s, options_for(s, false)).out;
  size_t differ = 0;
  for (size_t i = 0; i < with.size(); ++i) differ += std::abs(with[i] - without[i]) > 1e-3f;
  EXPECT_GT(differ, with.size() / 2);
}

TEST(CpuAttention, LseIgnoresDropout) {
  // As in flash-attention: lse normalises the undropped probabilities, so the backward can
  // recompute them whatever was dropped.
  CpuBackend backend(2);
  const AttentionShape s{.batch = 1, .seq = 70, .heads = 2, .groups = 2, .head_dim = 16};
  const auto qkv = random_qkv(s, 7);
  EXPECT_EQ(run_forward(backend, qkv, s, options_for(s, true, 0.4f)).lse,
            run_forward(backend, qkv, s, options_for(s, true)).lse);
}

TEST(CpuAttention, Bf16ForwardMatchesNaiveSoftmaxOfTheRoundedInputs) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 1, .seq = 100, .heads = 4, .groups = 2, .head_dim = 32};
  auto qkv = random_qkv(s, 8);
  for (float& x : qkv) x = to_float(to_bf16(x));
  const auto o = options_for(s, true);
  // The f32 result is rounded to bf16 (8 significant bits) on the way out: 2^-8 relative.
  expect_all_near(run_forward(backend, qkv, s, o, DType::Bf16).out, naive_forward(qkv, s, o).out,
                  kForwardTolerance, "out", 1.0 / 256);
}

TEST(CpuAttention, CausalBackwardMatchesNumericGradient) {
  check_gradient({.batch = 2, .seq = 70, .heads = 2, .groups = 2, .head_dim = 4},
                 options_for({.head_dim = 4}, true));
}

TEST(CpuAttention, UnmaskedBackwardMatchesNumericGradient) {
  check_gradient({.batch = 1, .seq = 70, .heads = 2, .groups = 2, .head_dim = 4},
                 options_for({.head_dim = 4}, false));
}

TEST(CpuAttention, GroupedQueryBackwardSumsKeyAndValueGradientsOverTheGroup) {
  check_gradient({.batch = 1, .seq = 67, .heads = 4, .groups = 2, .head_dim = 4},
                 options_for({.head_dim = 4}, true));
}

TEST(CpuAttention, DropoutBackwardMatchesNumericGradient) {
  check_gradient({.batch = 1, .seq = 70, .heads = 4, .groups = 2, .head_dim = 4},
                 options_for({.head_dim = 4}, true, 0.3f));
}

// BERT's padding mask: sequence b attends to its first key_lengths[b] keys only. 70 and 130
// keys end inside a 64-key block; 1 leaves a single key; 200 is the whole sequence.
AttentionOptions padded(const AttentionShape& s, bool causal, std::vector<int64_t> keys,
                        float dropout = 0.0f) {
  AttentionOptions o = options_for(s, causal, dropout);
  o.key_lengths = std::move(keys);
  return o;
}

TEST(CpuAttention, PaddingMaskedForwardMatchesNaiveSoftmaxOverTheSequencesKeys) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 4, .seq = 200, .heads = 2, .groups = 1, .head_dim = 16};
  const auto qkv = random_qkv(s, 5);
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const AttentionOptions o = padded(s, causal, {70, 1, 200, 130});
    const Result got = run_forward(backend, qkv, s, o);
    const Forward want = naive_forward(qkv, s, o);
    expect_all_near(got.out, want.out, kForwardTolerance, "out");
    expect_all_near(got.lse, want.lse, 5e-6, "lse", 1e-6);
  }
}

TEST(CpuAttention, PaddedKeysChangeNothingWhateverTheyHold) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 1, .seq = 100, .heads = 2, .groups = 2, .head_dim = 8};
  const AttentionOptions o = padded(s, false, {37});
  auto qkv = random_qkv(s, 6);
  const Result before = run_forward(backend, qkv, s, o);
  for (int64_t row = 37; row < s.seq; ++row)  // every key and value of the padding
    for (int64_t c = 0; c < s.qkv_width(); ++c) qkv[static_cast<size_t>(row * s.qkv_width() + c)] *= -7.0f;
  const Result after = run_forward(backend, qkv, s, o);
  for (int64_t i = 0; i < 37 * s.heads * s.head_dim; ++i)
    EXPECT_EQ(before.out[static_cast<size_t>(i)], after.out[static_cast<size_t>(i)]) << i;
}

TEST(CpuAttention, PaddingMaskedBackwardMatchesNumericGradient) {
  const AttentionShape s{.batch = 2, .seq = 70, .heads = 2, .groups = 1, .head_dim = 4};
  check_gradient(s, padded(s, false, {45, 66}));
  check_gradient(s, padded(s, true, {70, 3}, 0.3f));
}

TEST(CpuAttention, PaddingMaskedBackwardMatchesNaiveDoubleBackward) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 150, .heads = 4, .groups = 2, .head_dim = 32};
  const AttentionOptions o = padded(s, false, {150, 77});
  const auto qkv = random_qkv(s, 7);
  const auto dout = random_values(out_size(s), 8);
  expect_all_near(run_backward(backend, qkv, dout, s, o), naive_backward(qkv, dout, s, o), 5e-5,
                  "dqkv", 1e-3);
}

TEST(CpuAttention, RejectsKeyLengthsOutsideTheSequenceOrOfAnotherBatch) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 2, .seq = 8, .heads = 1, .groups = 1, .head_dim = 4};
  const auto qkv = random_qkv(s, 9);
  for (const std::vector<int64_t>& keys :
       std::vector<std::vector<int64_t>>{{8}, {0, 8}, {9, 8}, {8, 8, 8}}) {
    EXPECT_THROW(run_forward(backend, qkv, s, padded(s, false, keys)), std::logic_error)
        << keys.size() << " lengths, first " << keys[0];
  }
}

// Documents packed into a sequence (reset_attention_mask): each row's first key is where its
// document starts. The starts cross and end inside 64-key blocks, include one-token documents
// (64, 65) and a last document of one token (199); the second sequence is one document.
AttentionOptions packed(const AttentionShape& s, const std::vector<std::vector<int64_t>>& starts,
                        float dropout = 0.0f) {
  AttentionOptions o = options_for(s, true, dropout);
  o.first_keys = test_support::first_keys_of(s.seq, starts);
  return o;
}

const std::vector<std::vector<int64_t>> kDocuments = {{0, 30, 64, 65, 150, 199}, {0}};

TEST(CpuAttention, PackedDocumentsForwardMatchesNaiveSoftmaxWithinEachDocument) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 200, .heads = 2, .groups = 1, .head_dim = 16};
  const auto qkv = random_qkv(s, 21);
  const AttentionOptions o = packed(s, kDocuments);
  const Result got = run_forward(backend, qkv, s, o);
  const Forward want = naive_forward(qkv, s, o);
  expect_all_near(got.out, want.out, kForwardTolerance, "out");
  expect_all_near(got.lse, want.lse, 5e-6, "lse", 1e-6);
}

TEST(CpuAttention, APackedDocumentAttendsAsItWouldAlone) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 1, .seq = 200, .heads = 2, .groups = 2, .head_dim = 8};
  const auto qkv = random_qkv(s, 22);
  const Result whole = run_forward(backend, qkv, s, packed(s, {{0, 30, 150}}));
  // The document at 30..149 as a sequence of its own.
  const AttentionShape alone{.batch = 1, .seq = 120, .heads = 2, .groups = 2, .head_dim = 8};
  const std::vector<float> part(qkv.begin() + 30 * s.qkv_width(), qkv.begin() + 150 * s.qkv_width());
  const Result own = run_forward(backend, part, alone, options_for(alone, true));
  const int64_t width = s.heads * s.head_dim;
  const std::vector<float> slice(whole.out.begin() + 30 * width, whole.out.begin() + 150 * width);
  expect_all_near(slice, own.out, 1e-6, "the document's outputs");
}

TEST(CpuAttention, PackedDocumentsBackwardMatchesNumericGradient) {
  const AttentionShape s{.batch = 2, .seq = 70, .heads = 2, .groups = 1, .head_dim = 4};
  check_gradient(s, packed(s, {{0, 5, 6, 64}, {0, 69}}));
  check_gradient(s, packed(s, {{0, 40}, {0}}, 0.3f));
}

TEST(CpuAttention, PackedDocumentsBackwardMatchesNaiveDoubleBackward) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 200, .heads = 4, .groups = 2, .head_dim = 32};
  const auto qkv = random_qkv(s, 23);
  const auto dout = random_values(out_size(s), 24);
  for (float dropout : {0.0f, 0.2f}) {
    const AttentionOptions o = packed(s, kDocuments, dropout);
    expect_all_near(run_backward(backend, qkv, dout, s, o), naive_backward(qkv, dout, s, o), 5e-5,
                    "dqkv", 1e-3);
  }
}

TEST(CpuAttention, RejectsFirstKeysAfterTheirRowOrDecreasingOrOfAnotherShape) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 1, .seq = 4, .heads = 1, .groups = 1, .head_dim = 4};
  const auto qkv = random_qkv(s, 25);
  for (const std::vector<int64_t>& first :
       std::vector<std::vector<int64_t>>{{0, 2, 2, 2}, {0, 1, 0, 0}, {0, 0, 0}, {-1, 0, 0, 0}}) {
    AttentionOptions o = options_for(s, true);
    o.first_keys = first;
    EXPECT_THROW(run_forward(backend, qkv, s, o), std::logic_error) << first[1] << first[2];
  }
}

TEST(CpuAttention, BackwardMatchesNaiveDoubleBackwardAtTrainingHeadDim) {
  CpuBackend backend(2);
  const AttentionShape s{.batch = 2, .seq = 150, .heads = 4, .groups = 2, .head_dim = 64};
  const auto qkv = random_qkv(s, 9);
  const auto dout = random_values(out_size(s), 10);
  for (float dropout : {0.0f, 0.2f}) {
    const auto o = options_for(s, true, dropout);
    // Gradients are sums of up to 150 * 64 products of magnitude ~1 with softmax weights: f32
    // accumulation leaves them ~1e-5 from the double result.
    expect_all_near(run_backward(backend, qkv, dout, s, o), naive_backward(qkv, dout, s, o), 5e-5,
                    dropout > 0 ? "dqkv with dropout" : "dqkv");
  }
}

TEST(CpuAttention, ForwardIsBitwiseTheSameOnOneAndTwoThreads) {
  CpuBackend one(1), two(2);
  const AttentionShape s{.batch = 2, .seq = 200, .heads = 4, .groups = 2, .head_dim = 64};
  const auto qkv = random_qkv(s, 13);
  const auto o = options_for(s, true, 0.1f);
  const Result a = run_forward(one, qkv, s, o), b = run_forward(two, qkv, s, o);
  EXPECT_TRUE(same_bits(a.out, b.out));
  EXPECT_TRUE(same_bits(a.lse, b.lse));
}

TEST(CpuAttention, BackwardIsBitwiseTheSameOnOneAndTwoThreads) {
  CpuBackend one(1), two(2);
  const AttentionShape s{.batch = 2, .seq = 200, .heads = 4, .groups = 2, .head_dim = 64};
  const auto qkv = random_qkv(s, 14);
  const auto dout = random_values(out_size(s), 15);
  const auto o = options_for(s, true, 0.1f);
  EXPECT_TRUE(same_bits(run_backward(one, qkv, dout, s, o), run_backward(two, qkv, dout, s, o)));
}

TEST(CpuAttention, RejectsHeadsThatDoNotSplitIntoGroups) {
  CpuBackend backend(1);
  const AttentionShape s{.batch = 1, .seq = 4, .heads = 3, .groups = 2, .head_dim = 4};
  Tensor qkv = backend.zeros({4, s.qkv_width()}, DType::F32);
  Tensor out = backend.empty({4, 12}, DType::F32);
  Tensor lse = backend.empty({1, 3, 4}, DType::F32);
  EXPECT_THROW(backend.attention_forward(qkv, s, options_for(s, true), out, lse), std::logic_error);
}

}  // namespace cpu_attention_test
}  // namespace megatron::tensor
