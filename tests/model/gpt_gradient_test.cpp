// The whole GPT's backward against finite differences of its forward, over every weight.
#include <gtest/gtest.h>

#include "model/gpt_model.hpp"
#include "model/tiny_gpt.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"

namespace megatron::model {
namespace {

using recipe::Recompute;
using test_support::tiny_batch;

// Mean masked loss as a function of one parameter's values.
double loss_with(tensor::Backend& b, GptModel& m, const GptBatch& batch, Parameter& p,
                 const std::vector<float>& values, const Pass& pass) {
  tensor::write_floats(b, p.value, values);
  const LossSum sum = m.forward(pass, batch, nullptr);
  return sum.loss / sum.tokens;
}

// Checks every parameter's gradient of the mean loss. Finite differences in f32 with a step of
// 1e-2 on weights of scale 0.2: the truncation error is O(step^2) relative and the rounding
// error about 1e-7 * |loss| / step; both stay under 2e-3 of the largest gradient element.
void expect_gradients_match_finite_differences(const GptConfig& config, bool training,
                                               Recompute recompute = Recompute::None) {
  tensor::CpuBackend b(1);
  GptConfig c = config;
  c.recompute = recompute;
  c.recompute_layers = recompute == Recompute::Full ? c.num_layers : 0;
  GptModel m(b, c);
  m.initialise(42);
  const GptBatch batch = tiny_batch(b, c, 2);
  // Training passes run dropout (when the config has it); evaluation passes of the same key
  // would not, so the finite differences use a training pass too: the mask depends only on
  // the key, so every forward sees the same one.
  const Pass pass{.backend = b, .training = training, .seed = 5, .iteration = 3};

  m.parameters().zero_grads();
  GptActivations saved;
  const LossSum sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved, float(1.0 / sum.tokens));

  for (const auto& p : m.parameters().all()) {
    const std::vector<float> original = tensor::to_floats(b, p->value);
    std::vector<double> numeric(original.size());
    std::vector<float> x = original;
    for (size_t i = 0; i < x.size(); ++i) {
      const float eps = 1e-2f;
      x[i] = original[i] + eps;
      const double plus = loss_with(b, m, batch, *p, x, pass);
      x[i] = original[i] - eps;
      const double minus = loss_with(b, m, batch, *p, x, pass);
      x[i] = original[i];
      numeric[i] = (plus - minus) / (2.0 * eps);
    }
    tensor::write_floats(b, p->value, original);
    test_support::expect_gradient_near(tensor::to_floats(b, p->grad), numeric, 3e-3, 1e-5,
                                       p->name.c_str());
  }
}

TEST(GptGradients, GptShapedModelMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_gpt_config(), false);
}

TEST(GptGradients, LlamaShapedModelMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_llama_config(), false);
}

TEST(GptGradients, ModelWithDropoutMatchesFiniteDifferences) {
  GptConfig c = test_support::tiny_gpt_config();
  c.hidden_dropout = 0.2;
  c.attention_dropout = 0.2;
  expect_gradients_match_finite_differences(c, true);
}

TEST(GptGradients, ExactGeluTanhAndUntiedOutputMatchFiniteDifferences) {
  GptConfig c = test_support::tiny_gpt_config();
  c.activation = recipe::Activation::GeluTanh;
  c.tie_embeddings = false;
  c.groups = 1;
  expect_gradients_match_finite_differences(c, false);
}

// Recompute must not change a single bit: the recomputed forward draws the same dropout masks
// and runs the same ops in the same order.
std::vector<std::vector<float>> gradients(Recompute recompute) {
  tensor::CpuBackend b(1);
  GptConfig c = test_support::tiny_llama_config();
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  c.recompute = recompute;
  c.recompute_layers = recompute == Recompute::Full ? 1 : 0;
  GptModel m(b, c);
  m.initialise(3);
  const GptBatch batch = tiny_batch(b, c, 3);
  const Pass pass{.backend = b, .training = true, .seed = 9, .iteration = 1};
  GptActivations saved;
  const LossSum sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved, float(1.0 / sum.tokens));
  std::vector<std::vector<float>> grads;
  for (const auto& p : m.parameters().all()) grads.push_back(tensor::to_floats(b, p->grad));
  return grads;
}

TEST(GptRecompute, SelectiveRecomputeGivesBitwiseTheSameGradients) {
  EXPECT_EQ(gradients(Recompute::Selective), gradients(Recompute::None));
}

TEST(GptRecompute, FullRecomputeGivesBitwiseTheSameGradients) {
  EXPECT_EQ(gradients(Recompute::Full), gradients(Recompute::None));
}

TEST(GptRecompute, FullRecomputeKeepsOnlyTheBlockInputs) {
  tensor::CpuBackend b(1);
  GptConfig c = test_support::tiny_gpt_config();
  auto activation_bytes = [&](Recompute r) {
    c.recompute = r;
    c.recompute_layers = r == Recompute::Full ? c.num_layers : 0;
    GptModel m(b, c);
    const GptBatch batch = tiny_batch(b, c, 2);
    const int64_t before = b.memory().allocated_bytes;
    GptActivations saved;
    m.forward({.backend = b}, batch, &saved);
    return b.memory().allocated_bytes - before;
  };
  const int64_t none = activation_bytes(Recompute::None);
  const int64_t selective = activation_bytes(Recompute::Selective);
  const int64_t full = activation_bytes(Recompute::Full);
  EXPECT_LT(selective, none);
  EXPECT_LT(full, selective);
}

}  // namespace
}  // namespace megatron::model
