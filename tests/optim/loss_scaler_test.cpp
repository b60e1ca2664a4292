#include "optim/loss_scaler.hpp"

#include <gtest/gtest.h>

namespace megatron::optim {
namespace {

TEST(LossScaler, StartsAtTwoToTheThirtyTwoAsMegatron) {
  EXPECT_EQ(LossScaler().scale(), 4294967296.0);
}

TEST(LossScaler, HalvesOnlyOnceTheHysteresisIsUsedUp) {
  LossScaler scaler({.initial_scale = 1024.0, .hysteresis = 2});
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0);
  scaler.update(true);  // hysteresis stays spent until a growth
  EXPECT_EQ(scaler.scale(), 256.0);
}

TEST(LossScaler, DoublesAfterAWindowOfCleanSteps) {
  LossScaler scaler({.initial_scale = 8.0, .window = 3});
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 8.0);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16.0);
}

TEST(LossScaler, AnOverflowRestartsTheGrowthWindow) {
  LossScaler scaler({.initial_scale = 8.0, .window = 2, .hysteresis = 5});
  scaler.update(false);
  scaler.update(true);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 8.0);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16.0);
}

TEST(LossScaler, NeverFallsBelowTheMinimum) {
  LossScaler scaler({.initial_scale = 2.0, .min_scale = 1.0, .hysteresis = 1});
  for (int i = 0; i < 5; ++i) scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1.0);
}

TEST(LossScaler, AConstantScaleNeverMoves) {
  LossScaler scaler({.initial_scale = 128.0, .window = 1, .dynamic = false});
  scaler.update(true);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 128.0);
}

}  // namespace
}  // namespace megatron::optim
