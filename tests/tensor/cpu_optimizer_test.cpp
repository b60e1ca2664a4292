// CpuBackend's normal initialisation and its AdamW and SGD updates against closed forms in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace cpu_optimizer_test {

using test_support::random_values;

class CpuOptimizerTest : public ::testing::Test {
 protected:
  CpuBackend backend;

  Tensor make(const std::vector<float>& values, DType dtype = DType::F32) {
    return from_floats(backend, values, {static_cast<int64_t>(values.size())}, dtype);
  }
  std::vector<float> values(const Tensor& t) { return to_floats(backend, t); }
};

constexpr RngKey kKey{.seed = 42, .stream = 3};

// --- normal -------------------------------------------------------------------------------------

TEST_F(CpuOptimizerTest, StandardNormalDrawsNormalAtForEveryElement) {
  const int64_t n = 10003;  // not a multiple of four: the last Philox block is partial
  Tensor x = backend.empty({n}, DType::F32);
  backend.normal(x, 0.0f, 1.0f, kKey);
  const auto got = values(x);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], normal_at(kKey, static_cast<uint64_t>(i))) << i;
}

TEST_F(CpuOptimizerTest, ANormalShardWithAnOffsetDrawsThatPartOfTheWholeTensor) {
  // Offsets that start mid-Philox-block and shards that end mid-block (a tensor-parallel slice).
  for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{6}, uint64_t{4097}}) {
    Tensor x = backend.empty({1001}, DType::F32);
    RngKey key = kKey;
    key.offset = offset;
    backend.normal(x, 0.0f, 1.0f, key);
    const auto got = values(x);
    for (int64_t i = 0; i < 1001; ++i) {
      ASSERT_EQ(got[i], normal_at(kKey, offset + static_cast<uint64_t>(i))) << offset << " " << i;
    }
  }
}

TEST_F(CpuOptimizerTest, NormalShiftsByTheMeanAndScalesByTheStd) {
  const int64_t n = 5000;
  Tensor x = backend.empty({n}, DType::F32);
  backend.normal(x, 2.0f, 0.5f, kKey);
  const auto got = values(x);
  for (int64_t i = 0; i < n; ++i) {
    const double want = 2.0 + 0.5 * double(normal_at(kKey, static_cast<uint64_t>(i)));
    // One f32 multiply-add: within an ulp of the result, whether or not it is fused.
    ASSERT_NEAR(got[i], want, 2.5e-7 * std::abs(want)) << i;
  }
}

TEST_F(CpuOptimizerTest, NormalSampleHasTheRequestedMoments) {
  const int64_t n = int64_t{1} << 20;
  Tensor x = backend.empty({n}, DType::Bf16);
  backend.normal(x, 1.0f, 0.02f, kKey);
  const auto got = values(x);
  double sum = 0.0, sum_sq = 0.0;
  for (float v : got) {
    sum += v;
    sum_sq += double(v) * v;
  }
  const double mean = sum / n, std = std::sqrt(sum_sq / n - mean * mean);
  // Standard errors: 0.02 / sqrt(n) = 2e-5 for the mean, 0.02 / sqrt(2n) = 1.4e-5 for the std;
  // bf16 rounding of values near 1 (steps of 2^-8) adds ~1e-3 of noise to each, averaged out
  // in the mean but adding ~0.0011^2 / (2 * 0.02) = 3e-5 of variance bias to the std.
  EXPECT_NEAR(mean, 1.0, 1e-4);
  EXPECT_NEAR(std, 0.02, 2e-4);
}

TEST_F(CpuOptimizerTest, NormalWithAnotherStreamDrawsOtherValues) {
  Tensor a = backend.empty({64}, DType::F32), b = backend.empty({64}, DType::F32);
  backend.normal(a, 0.0f, 1.0f, kKey);
  backend.normal(b, 0.0f, 1.0f, RngKey{.seed = kKey.seed, .stream = kKey.stream + 1});
  EXPECT_NE(values(a), values(b));
}

// --- AdamW --------------------------------------------------------------------------------------

struct AdamWReference {
  std::vector<double> master, m, v;
};

// One step of torch.optim.AdamW in double: decoupled decay, moments, bias-corrected update.
void adamw_reference_step(AdamWReference& s, const std::vector<float>& grad, const AdamWStep& h) {
  const double b1 = h.beta1, b2 = h.beta2;
  for (size_t i = 0; i < grad.size(); ++i) {
    const double g = double(grad[i]) * h.grad_scale;
    s.master[i] *= 1.0 - double(h.lr) * h.weight_decay;
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g * g;
    const double mhat = s.m[i] / (1.0 - std::pow(b1, double(h.step)));
    const double vhat = s.v[i] / (1.0 - std::pow(b2, double(h.step)));
    s.master[i] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
  }
}

TEST_F(CpuOptimizerTest, AdamWFollowsTheClosedFormOverSeveralSteps) {
  const int64_t n = 1000;  // not a multiple of the vector width: the scalar tail runs too
  const auto initial = random_values(n, 1);
  AdamWReference want{
      {initial.begin(), initial.end()}, std::vector<double>(n), std::vector<double>(n)};
  Tensor master = make(initial), m = backend.zeros({n}, DType::F32),
         v = backend.zeros({n}, DType::F32);
  for (int64_t step = 1; step <= 5; ++step) {
    const auto grad = random_values(n, 10 + static_cast<uint32_t>(step), 4.0f);
    const AdamWStep h{.lr = 1e-2f,
                      .beta1 = 0.9f,
                      .beta2 = 0.95f,
                      .eps = 1e-8f,
                      .weight_decay = 0.1f,
                      .step = step,
                      .grad_scale = 0.5f};
    backend.adamw_update(master, make(grad), m, v, h);
    adamw_reference_step(want, grad, h);
  }
  const auto got = values(master), got_m = values(m), got_v = values(v);
  for (int64_t i = 0; i < n; ++i) {
    // f32 state through five steps: each step's update (lr ~ 1e-2) carries a relative error of
    // a few f32 ulps, so the parameters stay within ~1e-6 of the double-precision trajectory.
    ASSERT_NEAR(got[i], want.master[i], 2e-6 * (1.0 + std::abs(want.master[i]))) << i;
    ASSERT_NEAR(got_m[i], want.m[i], 1e-5 * (1.0 + std::abs(want.m[i]))) << i;
    ASSERT_NEAR(got_v[i], want.v[i], 1e-5 * (1.0 + std::abs(want.v[i]))) << i;
  }
}

TEST_F(CpuOptimizerTest, AdamWFirstStepMovesEachParameterByLrAgainstItsGradientSign) {
  // After bias correction mhat = g and vhat = g^2, so the step is lr g / (|g| + eps).
  Tensor master = make({1.0f, 1.0f, 1.0f}), m = backend.zeros({3}, DType::F32),
         v = backend.zeros({3}, DType::F32);
  backend.adamw_update(master, make({0.3f, -20.0f, 1e-3f}), m, v, AdamWStep{.lr = 0.1f, .step = 1});
  const auto got = values(master);
  EXPECT_NEAR(got[0], 0.9f, 1e-6f);
  EXPECT_NEAR(got[1], 1.1f, 1e-6f);
  EXPECT_NEAR(got[2], 0.9f, 1e-5f);  // eps is 1e-5 of |g| here
}

TEST_F(CpuOptimizerTest, AdamWAcceptsA16BitGradient) {
  const auto grad = to_floats(backend, make(random_values(64, 2), DType::Bf16));
  Tensor a = make(std::vector<float>(64, 1.0f)), b = make(std::vector<float>(64, 1.0f));
  Tensor ma = backend.zeros({64}, DType::F32), va = backend.zeros({64}, DType::F32);
  Tensor mb = backend.zeros({64}, DType::F32), vb = backend.zeros({64}, DType::F32);
  const AdamWStep h{.lr = 1e-3f, .step = 1};
  backend.adamw_update(a, make(grad, DType::Bf16), ma, va, h);
  backend.adamw_update(b, make(grad), mb, vb, h);
  EXPECT_EQ(values(a), values(b));
}

TEST_F(CpuOptimizerTest, AdamWRejectsStepZero) {
  Tensor master = backend.zeros({4}, DType::F32), m = backend.zeros({4}, DType::F32),
         v = backend.zeros({4}, DType::F32);
  EXPECT_THROW(backend.adamw_update(master, backend.zeros({4}, DType::F32), m, v,
                                    AdamWStep{.lr = 1e-3f, .step = 0}),
               std::logic_error);
}

TEST_F(CpuOptimizerTest, AdamWRejectsA16BitMoment) {
  Tensor master = backend.zeros({4}, DType::F32), m = backend.zeros({4}, DType::Bf16),
         v = backend.zeros({4}, DType::F32);
  EXPECT_THROW(backend.adamw_update(master, backend.zeros({4}, DType::F32), m, v,
                                    AdamWStep{.lr = 1e-3f, .step = 1}),
               std::logic_error);
}

// --- SGD ----------------------------------------------------------------------------------------

TEST_F(CpuOptimizerTest, SgdWithoutMomentumStepsAgainstTheScaledGradient) {
  Tensor master = make({1.0f, -2.0f}), unused;
  backend.sgd_update(master, make({0.5f, -4.0f}), unused, SgdStep{.lr = 0.1f, .grad_scale = 0.5f});
  const auto got = values(master);
  EXPECT_FLOAT_EQ(got[0], 1.0f - 0.1f * 0.25f);
  EXPECT_FLOAT_EQ(got[1], -2.0f + 0.1f * 2.0f);
}

// buf starts at zero and becomes momentum buf + g each step, so the first step's buffer is g
// (torch's initialisation); weight decay is decoupled, master *= 1 - lr wd, before the step.
TEST_F(CpuOptimizerTest, SgdMomentumFollowsTheClosedFormOverSeveralSteps) {
  const int64_t n = 37;
  const auto initial = random_values(n, 3);
  std::vector<double> want(initial.begin(), initial.end()), buf(n, 0.0);
  Tensor master = make(initial), momentum = backend.zeros({n}, DType::F32);
  const SgdStep h{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f, .grad_scale = 2.0f};
  for (uint32_t step = 0; step < 4; ++step) {
    const auto grad = random_values(n, 20 + step);
    backend.sgd_update(master, make(grad), momentum, h);
    for (int64_t i = 0; i < n; ++i) {
      buf[i] = double(h.momentum) * buf[i] + double(grad[i]) * h.grad_scale;
      want[i] = want[i] * (1.0 - double(h.lr) * h.weight_decay) - double(h.lr) * buf[i];
    }
  }
  const auto got = values(master), got_buf = values(momentum);
  for (int64_t i = 0; i < n; ++i) {
    // A handful of f32 operations per step on values of size ~1: ~1e-6 accumulated.
    ASSERT_NEAR(got[i], want[i], 1e-5) << i;
    ASSERT_NEAR(got_buf[i], buf[i], 1e-5) << i;
  }
}

TEST_F(CpuOptimizerTest, SgdRejectsAMomentumBufferOfTheWrongSize) {
  Tensor master = backend.zeros({4}, DType::F32), momentum = backend.zeros({3}, DType::F32);
  EXPECT_THROW(backend.sgd_update(master, backend.zeros({4}, DType::F32), momentum,
                                  SgdStep{.lr = 0.1f, .momentum = 0.9f}),
               std::logic_error);
}

}  // namespace cpu_optimizer_test
}  // namespace megatron::tensor
