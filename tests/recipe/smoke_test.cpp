// recipe::smoke_overrides: what a smoke run changes in a recipe, decided from the recipe alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "recipe/smoke.hpp"

namespace megatron::recipe {
namespace {

using ::testing::Contains;
using ::testing::Not;

TEST(SmokeOverrides, DropThePretrainedWeightsTheShrunkModelCannotHold) {
  Recipe r;
  r.finetune.pretrained = "runs/pretrain";
  EXPECT_THAT(smoke_overrides(r), Contains("finetune.pretrained=null"));
}

TEST(SmokeOverrides, LeaveFinetuneAloneWithoutPretrainedWeights) {
  EXPECT_THAT(smoke_overrides(Recipe{}), Not(Contains("finetune.pretrained=null")));
}

}  // namespace
}  // namespace megatron::recipe
