#include "optim/lr_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace megatron::optim {
namespace {

using optim::LrDecay;
using optim::WsdDecay;

LrSchedule schedule(LrDecay style) {
  return {.max_lr = 1.0, .min_lr = 0.1, .warmup_iters = 10, .decay_iters = 110, .style = style};
}

TEST(LrSchedule, WarmupRisesLinearlyFromZeroToThePeak) {
  for (LrDecay style : {LrDecay::Constant, LrDecay::Linear, LrDecay::Cosine}) {
    EXPECT_DOUBLE_EQ(learning_rate(schedule(style), 1), 0.1);
    EXPECT_DOUBLE_EQ(learning_rate(schedule(style), 5), 0.5);
    EXPECT_DOUBLE_EQ(learning_rate(schedule(style), 10), 1.0);
  }
}

TEST(LrSchedule, ConstantStaysAtThePeakAfterWarmup) {
  EXPECT_DOUBLE_EQ(learning_rate(schedule(LrDecay::Constant), 500), 1.0);
}

TEST(LrSchedule, LinearDecaysToMinLrAtTheEndOfDecay) {
  const LrSchedule s = schedule(LrDecay::Linear);
  EXPECT_DOUBLE_EQ(learning_rate(s, 60), 0.1 + 0.5 * 0.9);
  EXPECT_DOUBLE_EQ(learning_rate(s, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(s, 111), 0.1);
}

TEST(LrSchedule, CosineFollowsHalfACosineWave) {
  const LrSchedule s = schedule(LrDecay::Cosine);
  const double quarter = 0.1 + 0.9 * 0.5 * (std::cos(std::numbers::pi * 0.25) + 1.0);
  EXPECT_NEAR(learning_rate(s, 35), quarter, 1e-12);
  EXPECT_NEAR(learning_rate(s, 60), 0.55, 1e-12);
  EXPECT_NEAR(learning_rate(s, 110), 0.1, 1e-12);
}

TEST(LrSchedule, InverseSquareRootDecaysAsOneOverRootIterationAfterWarmup) {
  const LrSchedule s = schedule(LrDecay::InverseSquareRoot);
  EXPECT_NEAR(learning_rate(s, 40), std::sqrt(10.0 / 40.0), 1e-12);
  EXPECT_NEAR(learning_rate(s, 100), std::sqrt(10.0 / 100.0), 1e-12);
}

TEST(LrSchedule, WsdHoldsThePeakThenDecaysOverItsFinalPhase) {
  LrSchedule s = schedule(LrDecay::Wsd);
  s.wsd_decay_iters = 20;  // anneal from iteration 90 to 110
  EXPECT_DOUBLE_EQ(learning_rate(s, 50), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 90), 1.0);
  EXPECT_NEAR(learning_rate(s, 100), 0.1 + 0.9 * 0.5, 1e-12);
  s.wsd_style = WsdDecay::MinusSqrt;
  EXPECT_NEAR(learning_rate(s, 100), 0.1 + 0.9 * (1.0 - std::sqrt(0.5)), 1e-12);
  s.wsd_style = WsdDecay::Exponential;
  EXPECT_NEAR(learning_rate(s, 110), 0.1, 1e-12);
}

}  // namespace
}  // namespace megatron::optim
