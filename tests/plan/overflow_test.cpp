// Plans of the largest recipes the schema allows: counts past 64 bits are an error naming the
// keys, never a wrapped number, and nothing walks every rank of a huge world.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace overflow_test {

using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::make_gpt;
using ::testing::Not;
using testing::rederive;
using ::testing::StartsWith;

const HardwareProfile& h100() { return find_hardware("h100-sxm"); }

TEST(Overflow, AParameterCountPast64BitsIsAnErrorAtTheHiddenSize) {
  // 10^4 layers of 1000 heads x 10^6 channels over a 10^6-wide stream: ~4e19 parameters.
  recipe::CompiledRecipe c = make_gpt({.layers = 10'000, .hidden = 1'000'000, .heads = 1000});
  c.recipe.model.kv_channels = 1'000'000;
  rederive(c);
  try {
    make_plan(c, h100());
    FAIL() << "planned";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), StartsWith("test.yaml: the parameter count (from model.hidden_size, "
                                     "ffn_hidden_size, vocab_size, num_layers and the head "
                                     "sizes) overflows: "));
    EXPECT_THAT(e.what(), EndsWith("is too large; make model.hidden_size, ffn_hidden_size, "
                                   "vocab_size or num_layers smaller"));
  }
}

TEST(Overflow, TheLargestCountThatFitsIsExact) {
  // 10^5 layers of hidden 2^13: 12 h^2 + 13 h each, about 8e13 in all.
  const recipe::CompiledRecipe c = make_gpt({.layers = 100'000, .hidden = 8192, .heads = 64});
  const int64_t h = 8192;
  EXPECT_EQ(make_plan(c, h100()).parameters.total,
            100'000 * (12 * h * h + 13 * h) + (51200 + 2048) * h + 2 * h);
}

TEST(Overflow, AWorldOfTenBillionRanksIsPlannedWithoutVisitingEachRank) {
  const Plan plan = make_plan(
      make_gpt({.global_batch = 10'000'000'000, .data = 10'000'000'000, .flash_attention = true}),
      h100());
  EXPECT_EQ(plan.layout.world, 10'000'000'000);
  EXPECT_GT(plan.estimate.step_time_s, 0);
}

TEST(Overflow, TensorGroupsCrossingANodeAreFoundInAHugeWorld) {
  // Groups of 4 ranks on nodes of 6: the second group (ranks 4..7) straddles two nodes.
  recipe::CompiledRecipe crossing = make_gpt(
      {.global_batch = 1'000'000, .tensor = 4, .data = 1'000'000, .flash_attention = true});
  crossing.recipe.cluster.gpus_per_node = 6;
  EXPECT_THAT(make_plan(crossing, h100()).estimate.warnings,
              Contains(HasSubstr("parallel.tensor=4 does not stay inside a node of 6 GPUs")));
  // Groups of 4 on nodes of 8 never do.
  recipe::CompiledRecipe inside = crossing;
  inside.recipe.cluster.gpus_per_node = 8;
  EXPECT_THAT(make_plan(inside, h100()).estimate.warnings,
              Not(Contains(HasSubstr("does not stay inside a node"))));
}

}  // namespace overflow_test
}  // namespace megatron::plan
