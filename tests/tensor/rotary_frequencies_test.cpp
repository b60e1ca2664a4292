// rotary_frequencies: base^(-2i/d), and the linear, llama3 and yarn scalings against values computed
// with numpy from transformers' _compute_llama3_parameters (float64; Llama 3.1 8B's settings:
// base 500000, head dim 128, factor 8, low 1, high 4, original 8192).
#include "tensor/rotary_frequencies.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace megatron::tensor {
namespace rotary_frequencies_test {

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

// transformers 5.25's _compute_yarn_parameters (float32, hence 1e-6) for two settings: its
// defaults (beta_fast 32, beta_slow 1, truncate) on a head of 8 with base 500, factor 4 and an
// original context of 16, whose ramp ends at the first pair; and head 32, base 10000, factor 8,
// original 4096, beta_fast 16, beta_slow 2, truncate false, mscale 1 / mscale_all_dim 0.5.
TEST(RotaryFrequencies, YarnRampsBetweenKeptAndDividedFrequenciesAsTransformers) {
  const auto small = rotary_frequencies(
      {.rotary_dim = 8, .base = 500.0,
       .scaling = {.kind = RotaryScaling::Kind::Yarn, .factor = 4.0, .original_max_positions = 16.0}});
  const double want_small[] = {1.0, 0.0528685599565506, 0.011180340312421322, 0.0023643539752811193};
  ASSERT_EQ(small.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(small[i], want_small[i], 1e-6 * want_small[i]) << i;
  const auto wide = rotary_frequencies({.rotary_dim = 32,
                                        .base = 10000.0,
                                        .scaling = {.kind = RotaryScaling::Kind::Yarn,
                                                    .factor = 8.0,
                                                    .original_max_positions = 4096.0,
                                                    .beta_fast = 16.0,
                                                    .beta_slow = 2.0,
                                                    .truncate = false}});
  const double want_wide[] = {1.0, 0.5623413324356079, 0.3162277638912201, 0.17782793939113617,
                              0.10000000149011612, 0.05623412877321243, 0.03162277862429619,
                              0.015371676534414291, 0.006221889052540064, 0.0021367003209888935,
                              0.00043557558092288673, 0.00022228492889553308, 0.0001250000059371814,
                              7.029266271274537e-05, 3.9528473280370235e-05, 2.2228492525755428e-05};
  ASSERT_EQ(wide.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(wide[i], want_wide[i], 1e-6 * want_wide[i]) << i;
}

}  // namespace rotary_frequencies_test
}  // namespace megatron::tensor
