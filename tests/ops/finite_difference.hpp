// Finite-difference gradient checks, shared by the op harness (tests/ops) and the tests of
// tensor/ and model/: the loss L = sum_i w_i * f(x)_i (weights fixed and random, accumulated in
// f64) is differentiated numerically by central differences and compared with the op's own
// backward, called with dL/df = w.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace megatron::test_support {

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

inline double weighted_sum(const std::vector<float>& values, const std::vector<float>& weights) {
  double total = 0.0;
  for (size_t i = 0; i < values.size(); ++i) total += double(values[i]) * double(weights[i]);
  return total;
}

// dL/dx by central differences, perturbing each element of x by +-eps in turn.
inline std::vector<double> numeric_gradient(
    std::vector<float> x, const std::function<std::vector<float>(const std::vector<float>&)>& f,
    const std::vector<float>& weights, float eps = 1e-2f) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float original = x[i];
    x[i] = original + eps;
    const double plus = weighted_sum(f(x), weights);
    x[i] = original - eps;
    const double minus = weighted_sum(f(x), weights);
    x[i] = original;
    grad[i] = (plus - minus) / (2.0 * double(eps));
  }
  return grad;
}

// Every element within atol + rtol * max|numeric| of the numeric gradient: the error of a
// central difference in f32 scales with the gradient's overall magnitude, not each element's.
inline void expect_gradient_near(const std::vector<float>& analytic,
                                 const std::vector<double>& numeric, double rtol = 2e-3,
                                 double atol = 1e-5, const char* what = "gradient") {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double scale = 0.0;
  for (double g : numeric) scale = std::max(scale, std::abs(g));
  const double tolerance = atol + rtol * scale;
  size_t failures = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    if (std::abs(double(analytic[i]) - numeric[i]) > tolerance && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric "
                    << numeric[i] << " (tolerance " << tolerance << ")";
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << numeric.size()
                          << " elements off";
}

// The op harness checks a sample of a tensor's elements (finite differences cost two forwards
// an element): analytic is the whole gradient, numeric[k] the central difference at element
// indices[k]. The tolerance scales with the larger of max|analytic| over the whole tensor and
// max|numeric|, for the reason expect_gradient_near gives; taking both means that neither a
// gradient scaled down (to zero) nor one scaled up passes.
inline void expect_sampled_gradient_near(const std::vector<float>& analytic,
                                         const std::vector<size_t>& indices,
                                         const std::vector<double>& numeric, double rtol,
                                         double atol, const std::string& what) {
  ASSERT_EQ(indices.size(), numeric.size()) << what;
  double scale = 0.0;
  for (float g : analytic) scale = std::max(scale, std::abs(double(g)));
  for (double g : numeric) scale = std::max(scale, std::abs(g));
  const double tolerance = atol + rtol * scale;
  size_t failures = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    ASSERT_LT(indices[k], analytic.size()) << what;
    const double got = analytic[indices[k]];
    if (!(std::abs(got - numeric[k]) <= tolerance) && failures++ < 5) {
      ADD_FAILURE() << what << "[" << indices[k] << "]: analytic " << got << ", numeric "
                    << numeric[k] << " (tolerance " << tolerance << ")";
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << indices.size()
                          << " checked elements off";
}

}  // namespace megatron::test_support
