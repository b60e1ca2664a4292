// rotary_frequencies: base^(-2i/d), and the linear and llama3 scalings against values computed
// with numpy from transformers' _compute_llama3_parameters (float64; Llama 3.1 8B's settings:
// base 500000, head dim 128, factor 8, low 1, high 4, original 8192).
#include "tensor/rotary_frequencies.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace megatron::tensor {
namespace {

RotaryOptions llama31() {
  return {.rotary_dim = 128,
          .base = 500000.0,
          .scaling = {.kind = RotaryScaling::Kind::Llama3,
                      .factor = 8.0,
                      .original_max_positions = 8192.0,
                      .low_freq_factor = 1.0,
                      .high_freq_factor = 4.0}};
}

TEST(RotaryFrequencies, UnscaledAreBaseToTheMinusTwoIOverD) {
  const auto f = rotary_frequencies({.rotary_dim = 8, .base = 10000.0});
  ASSERT_EQ(f.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(f[size_t(i)], std::pow(10000.0, -2.0 * i / 8));
}

TEST(RotaryFrequencies, LinearDividesEveryFrequencyByTheFactor) {
  const auto f = rotary_frequencies({.rotary_dim = 8, .base = 10000.0, .scaling = {.kind = RotaryScaling::Kind::Linear, .factor = 4.0}});
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(f[size_t(i)], std::pow(10000.0, -2.0 * i / 8) / 4.0);
}

TEST(RotaryFrequencies, Llama3KeepsHighDividesLowAndBlendsBetweenAsTransformers) {
  const auto f = rotary_frequencies(llama31());
  ASSERT_EQ(f.size(), 64u);
  // index: numpy's value (high frequencies kept: 0, 20, 28; blended: 29..34; divided: 35..).
  const std::pair<int, double> expected[] = {
      {0, 1.0},
      {20, 0.016560440080994446},
      {28, 0.0032114459947525913},
      {29, 0.002166570763503359},
      {30, 0.0013718935677611381},
      {33, 0.00031269375038406517},
      {34, 0.00017850781276799638},
      {35, 9.556212353964683e-05},
      {40, 3.428102195952591e-05},
      {50, 4.411534674558404e-06},
      {63, 3.068925988914511e-07}};
  for (const auto& [i, want] : expected) EXPECT_NEAR(f[size_t(i)], want, 1e-12 * want) << "channel pair " << i;
}

}  // namespace
}  // namespace megatron::tensor
