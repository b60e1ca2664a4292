// Mode 1 of the op harness: every case's backward on the CPU backend against central differences
// of its forward, one test per case (`ctest -R llama_block`), for every input and parameter.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "ops/finite_difference.hpp"
#include "ops/op_case.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {
namespace {

using tensor::Tensor;

constexpr uint32_t kSeed = 1234;
// Two forwards per checked element: a tensor's elements up to this many are all checked, a larger
// one's are sampled (a different sample per tensor, fixed by the seed). Every tensor of today's
// cases is whole under it: a block's ~700 elements cost ~1,400 forwards, under 0.1 s.
constexpr size_t kCheckedElements = 256;

std::vector<size_t> checked_elements(size_t n, uint32_t seed) {
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  if (n <= kCheckedElements) return all;
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(kCheckedElements);
  std::sort(all.begin(), all.end());
  return all;
}

// L = sum_k w_k . outputs_k, accumulated in f64.
double weighted_loss(tensor::Backend& backend, const std::vector<Tensor>& outputs,
                     const std::vector<std::vector<float>>& weights) {
  double total = 0.0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    total += test_support::weighted_sum(tensor::to_floats(backend, outputs[k]), weights[k]);
  }
  return total;
}

// The check itself, apart from the test so that the harness's own test can break a case.
void expect_backward_matches_central_differences(const OpCase& c) {
  tensor::CpuBackend backend(1);
  OpRun run = c.make(backend, kSeed, 1);
  const std::vector<Tensor> outputs = run.forward();
  ASSERT_FALSE(outputs.empty()) << c.name;
  const std::vector<Tensor> weights = output_weights(backend, outputs, kSeed + 1);
  std::vector<std::vector<float>> w;
  for (const Tensor& t : weights) w.push_back(tensor::to_floats(backend, t));
  // Read every gradient before the first forward of the differences: a case may reuse buffers.
  std::vector<std::vector<float>> analytic;
  for (const Tensor& g : run.backward(weights)) analytic.push_back(tensor::to_floats(backend, g));
  ASSERT_EQ(analytic.size(), run.inputs.size()) << c.name << ": one gradient per input";

  const Tolerance& tol = c.tolerance;
  for (size_t i = 0; i < run.inputs.size(); ++i) {
    const Named& input = run.inputs[i];
    ASSERT_EQ(input.tensor.dtype(), tensor::DType::F32) << input.name;
    ASSERT_EQ(int64_t(analytic[i].size()), input.tensor.numel()) << "d" << input.name;
    float* x = input.tensor.data<float>();
    const std::vector<size_t> indices = checked_elements(analytic[i].size(), kSeed + uint32_t(i));
    std::vector<double> numeric;
    for (size_t at : indices) {
      const float original = x[at];
      const float up = original + tol.fd_step, down = original - tol.fd_step;
      x[at] = up;
      const double plus = weighted_loss(backend, run.forward(), w);
      x[at] = down;
      const double minus = weighted_loss(backend, run.forward(), w);
      x[at] = original;
      // The step actually taken: original +- step rounds in f32.
      numeric.push_back((plus - minus) / (double(up) - double(down)));
    }
    test_support::expect_sampled_gradient_near(analytic[i], indices, numeric, tol.fd_rtol,
                                               tol.fd_atol, c.name + ": d" + input.name);
  }
}

class OpGradients : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpGradients, BackwardMatchesCentralDifferencesOnTheCpu) {
  expect_backward_matches_central_differences(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGradients, ::testing::ValuesIn(all_op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

TEST(OpRegistry, EveryCaseNamesWhatItComputesAndWhyItsToleranceHolds) {
  for (const OpCase& c : all_op_cases()) {
    EXPECT_FALSE(c.what.empty()) << c.name;
    EXPECT_FALSE(c.tolerance.why.empty()) << c.name;
    EXPECT_GT(c.tolerance.fd_step, 0.0f) << c.name;
  }
}

// The harness must be able to fail: a case whose last gradient (the last input's) is scaled,
// as by a wrong constant, or left at zero, as by a forgotten accumulation.
OpCase broken(const std::string& name, float factor) {
  for (OpCase c : all_op_cases()) {
    if (c.name != name) continue;
    auto make = c.make;
    c.make = [make, factor](tensor::Backend& backend, uint32_t seed, int64_t scale) {
      OpRun run = make(backend, seed, scale);
      auto backward = run.backward;
      run.backward = [&backend, backward, factor](std::span<const Tensor> weights) {
        std::vector<Tensor> grads = backward(weights);
        backend.scale(grads.back(), factor);
        return grads;
      };
      return run;
    };
    return c;
  }
  throw std::logic_error("no op case named " + name);
}

// The failures the check of `c` reports, intercepted so that they do not fail this test.
std::vector<std::string> failures_of(const OpCase& c) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    expect_backward_matches_central_differences(c);
  }
  std::vector<std::string> messages;
  for (int i = 0; i < results.size(); ++i) {
    messages.emplace_back(results.GetTestPartResult(i).message());
  }
  return messages;
}

// Every failure names the broken gradient, and there is at least one.
void expect_only_failures_of(const std::vector<std::string>& failures, const std::string& what) {
  EXPECT_FALSE(failures.empty()) << what << " was broken and nothing failed";
  for (const std::string& f : failures) EXPECT_NE(f.find(what), std::string::npos) << f;
}

TEST(OpHarness, FailsABackwardScaledByOnePercent) {
  expect_only_failures_of(failures_of(broken("gemm", 1.01f)), "gemm: db");
  expect_only_failures_of(failures_of(broken("llama_block", 1.01f)),
                          "llama_block: ddecoder.layers.0.mlp.linear_fc2.weight");
}

TEST(OpHarness, FailsAGradientLeftAtZero) {
  expect_only_failures_of(failures_of(broken("layer_norm", 0.0f)), "layer_norm: dbeta");
}

}  // namespace
}  // namespace megatron::ops_test
