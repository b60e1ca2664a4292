// The rank grid in Megatron's tp-cp-dp-pp order and which layers each stage holds.
#include <gtest/gtest.h>

#include <numeric>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace layout_test {

using testing::make_gpt;

Plan plan_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm"));
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> out(last - first + 1);
  std::iota(out.begin(), out.end(), first);
  return out;
}

TEST(Layout, RankToCoordinatesAndBackIsTheIdentity) {
  const Layout layout{.tp = 2, .cp = 3, .dp = 2, .pp = 4, .vpp = 1, .world = 48};
  for (int64_t rank = 0; rank < layout.world; ++rank)
    EXPECT_EQ(layout.rank(layout.coord(rank)), rank);
}

TEST(Layout, TensorRanksAreAdjacentAndPipelineStagesFurthestApart) {
  const Layout layout{.tp = 2, .cp = 2, .dp = 2, .pp = 2, .vpp = 1, .world = 16};
  // rank = tp + 2 (cp + 2 (dp + 2 pp))
  EXPECT_EQ(layout.rank({.tp = 1, .cp = 0, .dp = 0, .pp = 0}), 1);
  EXPECT_EQ(layout.rank({.tp = 0, .cp = 1, .dp = 0, .pp = 0}), 2);
  EXPECT_EQ(layout.rank({.tp = 0, .cp = 0, .dp = 1, .pp = 0}), 4);
  EXPECT_EQ(layout.rank({.tp = 0, .cp = 0, .dp = 0, .pp = 1}), 8);
  const Layout::Coord c = layout.coord(13);  // 1 + 2 (0 + 2 (1 + 2 x 1))
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
}

TEST(Layout, PlanLayoutMultipliesToTheWorld) {
  const Plan plan =
      plan_of(make_gpt({.global_batch = 16, .tensor = 2, .pipeline = 2, .context = 2, .data = 2}));
  EXPECT_EQ(plan.layout.world, 16);
  EXPECT_EQ(plan.layout.tp * plan.layout.cp * plan.layout.dp * plan.layout.pp, plan.layout.world);
}

TEST(Layout, StagesHoldConsecutiveLayersInOrder) {
  const Plan plan = plan_of(make_gpt({.layers = 24, .global_batch = 8, .pipeline = 4}));
  ASSERT_EQ(plan.stages.size(), 4u);
  EXPECT_EQ(plan.stages[0].layers, range(0, 5));
  EXPECT_EQ(plan.stages[1].layers, range(6, 11));
  EXPECT_EQ(plan.stages[3].layers, range(18, 23));
}

TEST(Layout, InterleavedChunksNumberLayersChunkByChunkAcrossStages) {
  // 16 layers, p = 4, v = 2: chunk 0 of stages 0..3 holds layers 0..7, chunk 1 holds 8..15.
  const Plan plan =
      plan_of(make_gpt({.layers = 16, .global_batch = 8, .pipeline = 4, .virtual_pipeline = 2}));
  EXPECT_EQ(plan.stages[0].layers, (std::vector<int64_t>{0, 1, 8, 9}));
  EXPECT_EQ(plan.stages[3].layers, (std::vector<int64_t>{6, 7, 14, 15}));
}

TEST(Layout, EachStageListsItsChunksInTheOrderTheEngineBuildsThem) {
  const Plan plan = plan_of(make_gpt({.layers = 16, .global_batch = 8, .pipeline = 4,
                                      .virtual_pipeline = 2}));
  EXPECT_EQ(plan.stages[0].chunks, (std::vector<std::vector<int64_t>>{{0, 1}, {8, 9}}));
  EXPECT_EQ(plan.stages[3].chunks, (std::vector<std::vector<int64_t>>{{6, 7}, {14, 15}}));
  const Plan one = plan_of(make_gpt({.layers = 4, .global_batch = 8}));
  EXPECT_EQ(one.stages[0].chunks, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}}));
}

TEST(Layout, UnevenSplitFollowsTheDerivedLayersPerChunk) {
  const auto compiled =
      make_gpt({.layers = 10, .global_batch = 8, .pipeline = 3, .layers_per_stage = {3, 4, 3}});
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.stages[1].layers, range(3, 6));
  EXPECT_EQ(plan.stages[2].layers, range(7, 9));
}

TEST(Layout, EmbeddingOnTheFirstStageOutputLayerOnTheLast) {
  const Plan plan = plan_of(make_gpt({.global_batch = 8, .pipeline = 3}));
  EXPECT_TRUE(plan.stages[0].has_embedding);
  EXPECT_FALSE(plan.stages[0].has_output_layer);
  EXPECT_FALSE(plan.stages[1].has_embedding);
  EXPECT_FALSE(plan.stages[1].has_output_layer);
  EXPECT_TRUE(plan.stages[2].has_output_layer);
  EXPECT_FALSE(plan.stages[2].has_embedding);
}

TEST(Layout, OneStageHoldsEverything) {
  const Plan plan = plan_of(make_gpt({.global_batch = 8}));
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_TRUE(plan.stages[0].has_embedding);
  EXPECT_TRUE(plan.stages[0].has_output_layer);
  EXPECT_EQ(plan.stages[0].layers.size(), 24u);
}

TEST(Layout, T5PipelinesEncoderThenDecoderLayers) {
  auto compiled = make_gpt({.layers = 4, .global_batch = 8, .pipeline = 2});
  compiled.recipe.model.arch = recipe::Arch::T5;
  testing::rederive(compiled);  // 4 encoder + 4 decoder layers
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.stages[0].layers, range(0, 3));
  EXPECT_EQ(plan.stages[1].layers, range(4, 7));
}

}  // namespace layout_test
}  // namespace megatron::plan
