// CpuBackend cross-entropy: per-row loss and log-sum-exp against double references, and the
// backward (softmax - onehot) * dloss, including in place over the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_cross_entropy_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

double log_sum_exp(const std::vector<float>& logits, int64_t row, int64_t vocab) {
  double max = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < vocab; ++j) max = std::max(max, double(logits[size_t(row * vocab + j)]));
  for (int64_t j = 0; j < vocab; ++j)
    sum += std::exp(double(logits[size_t(row * vocab + j)]) - max);
  return max + std::log(sum);
}

struct Forward {
  std::vector<float> loss, lse;
};

Forward forward(CpuBackend& backend, const std::vector<float>& logits,
                const std::vector<int32_t>& targets, DType dtype = DType::F32) {
  const auto n = static_cast<int64_t>(targets.size());
  const Tensor x =
      from_floats(backend, logits, {n, static_cast<int64_t>(logits.size()) / n}, dtype);
  const Tensor t = from_ints(backend, targets, {n});
  Tensor loss = backend.empty({n}, DType::F32), lse = backend.empty({n}, DType::F32);
  backend.cross_entropy_forward(x, t, loss, lse);
  return {to_floats(backend, loss), to_floats(backend, lse)};
}

std::vector<float> backward(CpuBackend& backend, const std::vector<float>& logits,
                            const std::vector<int32_t>& targets, const std::vector<float>& dloss,
                            bool in_place, DType dtype = DType::F32) {
  const auto n = static_cast<int64_t>(targets.size());
  const Shape shape{n, static_cast<int64_t>(logits.size()) / n};
  Tensor x = from_floats(backend, logits, shape, dtype);
  const Tensor t = from_ints(backend, targets, {n});
  const Tensor lse = from_floats(backend, forward(backend, logits, targets, dtype).lse, {n});
  const Tensor dl = from_floats(backend, dloss, {n});
  if (in_place) {
    backend.cross_entropy_backward(x, t, lse, dl, x);
    return to_floats(backend, x);
  }
  Tensor dx = backend.empty(shape, dtype);
  backend.cross_entropy_backward(x, t, lse, dl, dx);
  return to_floats(backend, dx);
}

void expect_all_near(const std::vector<float>& got, const std::vector<double>& want,
                     double tolerance, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tolerance) && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0u) << what;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const std::vector<int32_t> kTargets{0, 999, 500, 3, 123, 777, 42};
constexpr int64_t kVocab = 1000;

TEST(CpuCrossEntropy, LossIsLogSumExpMinusTheTargetLogit) {
  CpuBackend backend(2);
  const auto logits = random_values(kTargets.size() * kVocab, 1, 3.0f);
  std::vector<double> want;
  for (size_t i = 0; i < kTargets.size(); ++i) {
    want.push_back(log_sum_exp(logits, int64_t(i), kVocab) -
                   logits[i * kVocab + size_t(kTargets[i])]);
  }
  // Losses ~10 from an f32 sum of 1000 exponentials: a few ulp of 10.
  expect_all_near(forward(backend, logits, kTargets).loss, want, 1e-5, "loss");
}

TEST(CpuCrossEntropy, SavesTheLogSumExpOfEachRow) {
  CpuBackend backend(2);
  const auto logits = random_values(kTargets.size() * kVocab, 2, 3.0f);
  std::vector<double> want;
  for (size_t i = 0; i < kTargets.size(); ++i)
    want.push_back(log_sum_exp(logits, int64_t(i), kVocab));
  expect_all_near(forward(backend, logits, kTargets).lse, want, 1e-5, "lse");
}

TEST(CpuCrossEntropy, StaysFiniteForLogitsFarBeyondExpsRange) {
  // exp(3000) overflows f32 (and f64): only a max-shifted sum gets this right.
  CpuBackend backend(2);
  const std::vector<float> logits{3000.0f, 2999.0f, 2990.0f, -5000.0f, -4999.0f, -5001.0f};
  const std::vector<int32_t> targets{1, 0};
  const double lse0 = 3000.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-10.0));
  const double lse1 = -4999.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
  // Relative to magnitudes of 5000: f32 resolves them to ~5e-4.
  expect_all_near(forward(backend, logits, targets).loss, {lse0 - 2999.0, lse1 + 5000.0}, 1e-3,
                  "loss");
}

TEST(CpuCrossEntropy, BackwardMatchesNumericGradient) {
  CpuBackend backend(2);
  const std::vector<int32_t> targets{3, 0, 49, 17};
  const auto logits = random_values(4 * 50, 3, 2.0f);
  const auto weights = random_values(4, 4);
  const auto numeric = numeric_gradient(
      logits, [&](const std::vector<float>& x) { return forward(backend, x, targets).loss; },
      weights);
  // Losses ~4 in f32 with eps 1e-2: ~1e-5 noise against gradients up to ~1.
  expect_gradient_near(backward(backend, logits, targets, weights, false), numeric, 2e-3, 1e-5,
                       "dlogits");
}

TEST(CpuCrossEntropy, BackwardIsSoftmaxMinusOneHotTimesDloss) {
  CpuBackend backend(2);
  const auto logits = random_values(kTargets.size() * kVocab, 5, 3.0f);
  const auto dloss = random_values(kTargets.size(), 6);
  std::vector<double> want(logits.size());
  for (size_t i = 0; i < kTargets.size(); ++i) {
    const double lse = log_sum_exp(logits, int64_t(i), kVocab);
    for (size_t j = 0; j < size_t(kVocab); ++j) {
      const double onehot = int32_t(j) == kTargets[i] ? 1.0 : 0.0;
      want[i * kVocab + j] = dloss[i] * (std::exp(logits[i * kVocab + j] - lse) - onehot);
    }
  }
  // Probabilities to f32 precision scaled by |dloss| < ~3.
  expect_all_near(backward(backend, logits, kTargets, dloss, false), want, 1e-6, "dlogits");
}

TEST(CpuCrossEntropy, InPlaceBackwardOverwritesTheLogitsWithTheirGradient) {
  CpuBackend backend(2);
  const auto logits = random_values(kTargets.size() * kVocab, 7, 3.0f);
  const auto dloss = random_values(kTargets.size(), 8);
  EXPECT_TRUE(same_bits(backward(backend, logits, kTargets, dloss, true),
                        backward(backend, logits, kTargets, dloss, false)));
}

TEST(CpuCrossEntropy, InPlaceBackwardWorksOnBf16Logits) {
  CpuBackend backend(2);
  const auto logits = random_values(kTargets.size() * kVocab, 9, 3.0f);
  const auto dloss = random_values(kTargets.size(), 10);
  EXPECT_TRUE(same_bits(backward(backend, logits, kTargets, dloss, true, DType::Bf16),
                        backward(backend, logits, kTargets, dloss, false, DType::Bf16)));
}

// Columns [first, first + width) of every row of a [rows, vocab] matrix.
std::vector<float> columns(const std::vector<float>& m, int64_t rows, int64_t vocab, int64_t first,
                           int64_t width) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = m.begin() + r * vocab + first;
    out.insert(out.end(), row, row + width);
  }
  return out;
}

// A vocab-parallel shard: its loss is its lse minus the target logit only where it holds the
// target, so lse - loss summed over shards is the target logit; its backward, given the whole
// row's lse, is exactly its columns of the whole backward.
TEST(CpuCrossEntropy, AVocabShardGivesItsPartOfTheLossAndOfTheGradient) {
  CpuBackend backend(2);
  const auto n = static_cast<int64_t>(kTargets.size());
  const int64_t half = kVocab / 2;
  const auto logits = random_values(size_t(n * kVocab), 11, 3.0f);
  const auto dloss = random_values(kTargets.size(), 12);
  const Forward whole = forward(backend, logits, kTargets);
  const std::vector<float> whole_grad = backward(backend, logits, kTargets, dloss, false);
  const Tensor targets = from_ints(backend, kTargets, {n});
  const Tensor whole_lse = from_floats(backend, whole.lse, {n});
  std::vector<double> target_logit(static_cast<size_t>(n), 0.0);
  for (const int64_t first : {int64_t{0}, half}) {
    const VocabShard shard{.first = first, .partial = true};
    Tensor x = from_floats(backend, columns(logits, n, kVocab, first, half), {n, half});
    Tensor loss = backend.empty({n}, DType::F32), lse = backend.empty({n}, DType::F32);
    backend.cross_entropy_forward(x, targets, loss, lse, shard);
    const auto l = to_floats(backend, loss), e = to_floats(backend, lse);
    for (size_t i = 0; i < size_t(n); ++i) target_logit[i] += double(e[i]) - double(l[i]);
    Tensor dx = backend.empty({n, half}, DType::F32);
    backend.cross_entropy_backward(x, targets, whole_lse, from_floats(backend, dloss, {n}), dx,
                                   shard);
    const auto want = columns(whole_grad, n, kVocab, first, half);
    expect_all_near(to_floats(backend, dx), std::vector<double>(want.begin(), want.end()), 1e-7,
                    "shard dlogits");
  }
  std::vector<double> want(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) want[i] = logits[i * kVocab + size_t(kTargets[i])];
  // lse (about 10) minus loss in f32: a few ulp of 10.
  std::vector<float> got(target_logit.begin(), target_logit.end());
  expect_all_near(got, want, 1e-5, "target logit");
}

TEST(CpuCrossEntropy, RejectsTargetsOutsideTheVocabulary) {
  CpuBackend backend(1);
  const Tensor logits = backend.zeros({2, 4}, DType::F32);
  const Tensor targets = from_ints(backend, std::vector<int32_t>{1, 4}, {2});
  Tensor loss = backend.empty({2}, DType::F32), lse = backend.empty({2}, DType::F32);
  EXPECT_THROW(backend.cross_entropy_forward(logits, targets, loss, lse), std::logic_error);
}

}  // namespace cpu_cross_entropy_test
}  // namespace megatron::tensor
