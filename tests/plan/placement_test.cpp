// Placing a recipe on its world: data parallelism, micro-batches, stages and chunks, each
// derived value with its arithmetic, and every layout that does not fit refused at its key.
#include "plan/placement.hpp"

#include "recipe/from_megatron.hpp"
#include "recipe/megatron_examples.hpp"
#include "recipe/recipe_test_util.hpp"

namespace megatron::plan {
namespace placement_test {

using recipe::kMinimalRecipe;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const recipe::Derivation* find(const Placement& p, const std::string& name) {
  for (const auto& x : p.log)
    if (x.name == name) return &x;
  return nullptr;
}

class PlacementTest : public recipe::RecipeTest {
 protected:
  Placement placed(const std::string& text, std::vector<std::string> overrides = {}) {
    return place(compile_text(text, std::move(overrides)));
  }
  // The message of the UserError that compiling or placing `text` throws ("" if neither does).
  std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
    try {
      placed(text, std::move(overrides));
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(PlacementTest, DataParallelSizeIsTheWorldOverTheModelParallelRanks) {
  const auto c = placed(kMinimalRecipe, {"cluster.nodes=2", "cluster.gpus_per_node=4",
                                               "parallel.tensor=2"});
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.data_parallel, 4);
  ASSERT_NE(find(c, "data-parallel size"), nullptr);
  EXPECT_EQ(find(c, "data-parallel size")->how,
            "world 8 / (tensor 2 x pipeline 1 x context 1)");
}

TEST_F(PlacementTest, TheRunningWorldSizeReplacesTheClusterSection) {
  recipe::CompileOptions options;
  options.world_size = 2;
  const Placement c = place(compile(dir_.write("r.yaml", kMinimalRecipe), options));
  EXPECT_EQ(c.data_parallel, 2);
  EXPECT_EQ(c.microbatches, 2);  // 8 / (2 x 2)
}

TEST_F(PlacementTest, MicroBatchesPerIterationAreGlobalOverMicroTimesDataParallel) {
  const auto c = placed(kMinimalRecipe, {"cluster.gpus_per_node=2"});
  EXPECT_EQ(c.microbatches, 2);
  EXPECT_EQ(find(c, "micro-batches per iteration")->how,
            "global batch 8 / (micro batch 2 x data-parallel 2)");
}

TEST_F(PlacementTest, LayersSplitEvenlyOverStagesAndChunksInMegatronOrder) {
  const auto c = placed(kMinimalRecipe,
                              {"model.num_layers=8", "parallel.pipeline=2", "parallel.virtual_pipeline=2",
                               "cluster.gpus_per_node=2"});
  EXPECT_THAT(c.layers_per_stage, ElementsAre(4, 4));
  EXPECT_THAT(c.layers_per_chunk, ElementsAre(2, 2, 2, 2));
  EXPECT_EQ(c.schedule, recipe::Schedule::Interleaved);
}

TEST_F(PlacementTest, ARampUpIncrementThatDataParallelRanksCannotShareIsRefused) {
  // micro batch 2 x data-parallel 2 = 4: a ramp through batches 4, 6, 8 would leave a batch of 6
  // that does not split into whole micro-batches on each rank.
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.gpus_per_node=2",
                                        "training.rampup_batch_size=[4, 2, 8]"}),
              HasSubstr("the ramp-up increment 2 is not divisible by micro batch x data-parallel = 4"));
}

TEST_F(PlacementTest, AnInterleavedRampUpMustKeepWholeGroupsOfPipelineMicroBatches) {
  // micro batch 2 x pipeline 2 = 4: a first batch of 2 is one micro-batch, which the interleaved
  // schedule cannot run on 2 stages.
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.num_layers=8", "parallel.pipeline=2",
                                        "parallel.virtual_pipeline=2", "cluster.gpus_per_node=2",
                                        "training.rampup_batch_size=[2, 2, 8]"}),
              HasSubstr("with the interleaved schedule every ramp-up batch must be a multiple of "
                        "micro batch x data-parallel x pipeline = 4"));
}

TEST_F(PlacementTest, FullRecomputeCoversEveryLayerOfAStageByDefault) {
  const auto c = placed(kMinimalRecipe, {"training.recompute=full"});
  EXPECT_EQ(c.recompute_layers, 4);
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.recompute=full", "training.recompute_num_layers=5"}),
              HasSubstr("recompute_num_layers (5) exceeds the 4 layers a stage holds"));
}

TEST_F(PlacementTest, BucketSizeDefaultsToMegatronsFortyMillionGrowingWithDataParallelRanks) {
  const auto small = placed(kMinimalRecipe, {"cluster.gpus_per_node=2"});
  EXPECT_EQ(small.bucket_elements, 40'000'000);
  ASSERT_NE(find(small, "ddp bucket size"), nullptr);
  EXPECT_EQ(find(small, "ddp bucket size")->how,
            "max(40,000,000, 1,000,000 x data-parallel size 2)");
  const auto wide = placed(kMinimalRecipe, {"cluster.nodes=8", "cluster.gpus_per_node=8",
                                                  "training.global_batch_size=128"});
  EXPECT_EQ(wide.bucket_elements, 64'000'000);
}

TEST_F(PlacementTest, AGivenBucketSizeIsUsedAsItIsWithoutANote) {
  const auto c = placed(kMinimalRecipe, {"parallel.ddp_bucket_size=1000"});
  EXPECT_EQ(c.bucket_elements, 1000);
  EXPECT_EQ(find(c, "ddp bucket size"), nullptr);
}

TEST_F(PlacementTest, LayersMustDivideByPipelineStages) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"parallel.pipeline=3", "cluster.gpus_per_node=3"}),
            "override 'parallel.pipeline=3': model.num_layers (4) do not split evenly over "
            "parallel.pipeline (3): 4 % 3 = 1; change the layout or give an uneven split with "
            "parallel.layers_per_stage");
}

TEST_F(PlacementTest, AnExplicitUnevenSplitMustAddUpToTheLayers) {
  const auto c = placed(kMinimalRecipe, {"parallel.pipeline=3", "cluster.gpus_per_node=3",
                                               "parallel.layers_per_stage=[1, 2, 1]"});
  EXPECT_THAT(c.layers_per_stage, ::testing::ElementsAre(1, 2, 1));
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.pipeline=3", "cluster.gpus_per_node=3",
                                        "parallel.layers_per_stage=[1, 1, 1]"}),
              HasSubstr("parallel.layers_per_stage adds up to 3 layers but the model has 4"));
}

TEST_F(PlacementTest, GlobalBatchMustDivideByMicroBatchTimesDataParallel) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"cluster.gpus_per_node=3"}),
            file() + ":10:22: training.global_batch_size (8) is not divisible by micro_batch_size "
                     "(2) x data-parallel size (3) = 6: 8 % 6 = 2; use a multiple of 6, e.g. 6 or 12");
}

TEST_F(PlacementTest, ModelParallelSizeMustDivideTheWorld) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"parallel.tensor=2", "parallel.pipeline=2",
                                      "cluster.gpus_per_node=6"}),
            "override 'parallel.tensor=2': tensor 2 x pipeline 2 x context 1 = 4 ranks per model "
            "replica does not divide the world size 6: 6 % 4 = 2; use a world size that is a "
            "multiple of 4 or change the layout");
}

TEST_F(PlacementTest, ExplicitDataParallelSizeMustMatchTheWorld) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.data=2", "cluster.gpus_per_node=4"}),
              HasSubstr("tensor 1 x context 1 x pipeline 1 x data 2 = 2 ranks, but the world has 4; "
                        "set parallel.data to 4 or remove it"));
}

TEST_F(PlacementTest, InterleavingNeedsAPipelineAndWholeChunks) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.virtual_pipeline=2"}),
              HasSubstr("needs parallel.pipeline > 1"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.virtual_pipeline=4", "parallel.pipeline=2",
                                        "cluster.gpus_per_node=2", "training.global_batch_size=4"}),
              HasSubstr("do not split evenly over pipeline 2 x virtual_pipeline 4 = 8 model chunks: 4 % 8 = 4"));
}

TEST_F(PlacementTest, T5PipelinesEncoderAndDecoderLayersTogether) {
  const Placement p = placed(kMinimalRecipe, {"model.arch=t5", "model.decoder_num_layers=4",
                                              "data.decoder_seq_length=16", "parallel.pipeline=2",
                                              "cluster.gpus_per_node=2"});
  EXPECT_THAT(p.layers_per_stage, ElementsAre(4, 4));
}

TEST_F(PlacementTest, TheLargestClusterIsCountedExactlyInItsErrors) {
  // 10^6 nodes x 10^4 GPUs once wrapped; now it is 10^10 ranks, too many for a batch of 8.
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.nodes=1000000", "cluster.gpus_per_node=10000"}),
              HasSubstr("training.global_batch_size (8) is not divisible by micro_batch_size (2) "
                        "x data-parallel size (10000000000) = 20000000000"));
}

TEST_F(PlacementTest, MegatronsBert340mExampleIsRefusedBecauseItsPipelineDoesNotDivideTheLayers) {
  const auto t = recipe::from_megatron(recipe::megatron_examples::kBert340m, "bert");
  EXPECT_THAT(error_of(t.yaml), HasSubstr("do not split evenly over parallel.pipeline (16)"));
}

TEST_F(PlacementTest, TheShippedGpt175bRecipeRunsEightReplicasOf192MicroBatches) {
  const Placement p = place(recipe::compile(std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-175b.yaml"));
  EXPECT_EQ(p.data_parallel, 8);
  EXPECT_EQ(p.microbatches, 192);
}

TEST_F(PlacementTest, TheRecipeCompilerAloneAcceptsALayoutThatOnlyTheWorldRefuses) {
  // The recipe is valid on its own; three ranks cannot hold its batch of 8 in micro-batches of 2.
  EXPECT_NO_THROW(compile_text(kMinimalRecipe, {"cluster.gpus_per_node=3"}));
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.gpus_per_node=3"}),
              HasSubstr("is not divisible by micro_batch_size"));
}

}  // namespace placement_test
}  // namespace megatron::plan
