// Derived values: what the recipe implies, each with the arithmetic that produced it.
#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Derivation* find(const Derived& d, const std::string& name) {
  for (const auto& x : d.log)
    if (x.name == name) return &x;
  return nullptr;
}

TEST_F(RecipeTest, DataParallelSizeIsTheWorldOverTheModelParallelRanks) {
  const auto c = compile_text(kMinimalRecipe, {"cluster.nodes=2", "cluster.gpus_per_node=4",
                                               "parallel.tensor=2"});
  EXPECT_EQ(c.derived.world_size, 8);
  EXPECT_EQ(c.derived.data_parallel, 4);
  ASSERT_NE(find(c.derived, "data-parallel size"), nullptr);
  EXPECT_EQ(find(c.derived, "data-parallel size")->how,
            "world 8 / (tensor 2 x pipeline 1 x context 1)");
}

TEST_F(RecipeTest, TheRunningWorldSizeReplacesTheClusterSection) {
  CompileOptions options;
  options.world_size = 2;
  const auto c = compile(dir_.write("r.yaml", kMinimalRecipe), options);
  EXPECT_EQ(c.derived.data_parallel, 2);
  EXPECT_EQ(c.derived.num_microbatches, 2);  // 8 / (2 x 2)
}

TEST_F(RecipeTest, MicroBatchesPerIterationAreGlobalOverMicroTimesDataParallel) {
  const auto c = compile_text(kMinimalRecipe, {"cluster.gpus_per_node=2"});
  EXPECT_EQ(c.derived.num_microbatches, 2);
  EXPECT_EQ(find(c.derived, "micro-batches per iteration")->how,
            "global batch 8 / (micro batch 2 x data-parallel 2)");
}

TEST_F(RecipeTest, FfnIsFourTimesHiddenForGeluAndEightThirdsRoundedForSwiglu) {
  EXPECT_EQ(compile_text(kMinimalRecipe).derived.ffn_hidden_size, 512);
  // Llama 7B: 8/3 x 4096 = 10922.7, rounded up to a multiple of 256 = 11008.
  const auto c = compile_text(kMinimalRecipe, {"model.activation=swiglu", "model.hidden_size=4096",
                                               "model.num_attention_heads=32"});
  EXPECT_EQ(c.derived.ffn_hidden_size, 11008);
  EXPECT_EQ(compile_text(kMinimalRecipe, {"model.ffn_hidden_size=100"}).derived.ffn_hidden_size, 100);
}

TEST_F(RecipeTest, HeadDimIsHiddenOverHeadsUnlessGiven) {
  EXPECT_EQ(compile_text(kMinimalRecipe).derived.head_dim, 32);
  EXPECT_EQ(compile_text(kMinimalRecipe, {"model.kv_channels=64"}).derived.head_dim, 64);
}

TEST_F(RecipeTest, VocabIsPaddedToAMultipleOf128TimesTensorParallel) {
  // GPT-2's 50257 tokens under TP 8 pad to a multiple of 1024: 51200 (Megatron's figure).
  const auto c = compile_text(kMinimalRecipe, {"model.vocab_size=50257", "parallel.tensor=8",
                                               "model.num_attention_heads=8",
                                               "cluster.gpus_per_node=8"});
  EXPECT_EQ(c.derived.padded_vocab_size, 51200);
  EXPECT_EQ(find(c.derived, "padded vocab")->how,
            "vocab 50257 rounded up to a multiple of 128 x tensor 8 = 1024 (+943 rows)");
  EXPECT_EQ(compile_text(kMinimalRecipe, {"model.vocab_size=50257"}).derived.padded_vocab_size, 50304);
}

TEST_F(RecipeTest, LayersSplitEvenlyOverStagesAndChunksInMegatronOrder) {
  const auto c = compile_text(kMinimalRecipe,
                              {"model.num_layers=8", "parallel.pipeline=2", "parallel.virtual_pipeline=2",
                               "cluster.gpus_per_node=2"});
  EXPECT_THAT(c.derived.layers_per_stage, ElementsAre(4, 4));
  EXPECT_THAT(c.derived.layers_per_chunk, ElementsAre(2, 2, 2, 2));
  EXPECT_EQ(c.derived.schedule, Schedule::Interleaved);
}

TEST_F(RecipeTest, TrainingLengthInTokensBecomesIterations) {
  // 1000 tokens / 64 per sequence = 15.6 -> 16 samples -> 16 / 8 = 2 iterations.
  const auto c = compile_text(kMinimalRecipe, {"training.train_tokens=1000"});
  EXPECT_EQ(c.derived.train_iters, 2);
}

TEST_F(RecipeTest, BatchRampUpAddsIterationsWhileTheBatchGrows) {
  // 3 increments of 2 over 8 samples: one every 8/3 samples. Batches 2 (consumed 2),
  // 2 (4), 4 (8), then the full 8: 16, 24, 32, 40 -> 7 iterations.
  const auto c = compile_text(kMinimalRecipe, {"training.rampup_batch_size=[2, 2, 8]",
                                               "training.train_samples=40"});
  EXPECT_EQ(c.derived.train_iters, 7);
}

TEST_F(RecipeTest, ARampUpIncrementThatDataParallelRanksCannotShareIsRefused) {
  // micro batch 2 x data-parallel 2 = 4: a ramp through batches 4, 6, 8 would leave a batch of 6
  // that does not split into whole micro-batches on each rank.
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.gpus_per_node=2",
                                        "training.rampup_batch_size=[4, 2, 8]"}),
              HasSubstr("the ramp-up increment 2 is not divisible by micro batch x data-parallel = 4"));
}

TEST_F(RecipeTest, AnInterleavedRampUpMustKeepWholeGroupsOfPipelineMicroBatches) {
  // micro batch 2 x pipeline 2 = 4: a first batch of 2 is one micro-batch, which the interleaved
  // schedule cannot run on 2 stages.
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.num_layers=8", "parallel.pipeline=2",
                                        "parallel.virtual_pipeline=2", "cluster.gpus_per_node=2",
                                        "training.rampup_batch_size=[2, 2, 8]"}),
              HasSubstr("with the interleaved schedule every ramp-up batch must be a multiple of "
                        "micro batch x data-parallel x pipeline = 4"));
}

TEST_F(RecipeTest, WarmupFractionIsTakenOfTheDecayIterations) {
  const auto c = compile_text(kMinimalRecipe, {"training.train_iters=1000",
                                               "training.lr_warmup_fraction=0.01"});
  EXPECT_EQ(c.derived.lr_decay_iters, 1000);
  EXPECT_EQ(c.derived.lr_warmup_iters, 10);
}

TEST_F(RecipeTest, AWarmupLongerThanTheDecayNamesTheKeysThatFixIt) {
  // No lr_decay_iters: the decay is train_iters long, and the line says so.
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.train_iters=10", "training.lr_warmup_iters=375"}),
              HasSubstr("the warmup (375 iterations, training.lr_warmup_iters) is longer than the "
                        "decay (10 iterations, training.lr_decay_iters (unset, so "
                        "training.train_iters)); lower training.lr_warmup_iters to at most 10 "
                        "iterations or raise the decay"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.train_iters=100", "training.lr_decay_iters=10",
                                        "training.lr_warmup_iters=20"}),
              HasSubstr("decay (10 iterations, training.lr_decay_iters);"));
}

TEST_F(RecipeTest, FullRecomputeCoversEveryLayerOfAStageByDefault) {
  const auto c = compile_text(kMinimalRecipe, {"training.recompute=full"});
  EXPECT_EQ(c.derived.recompute_num_layers, 4);
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.recompute=full", "training.recompute_num_layers=5"}),
              HasSubstr("recompute_num_layers (5) exceeds the 4 layers a stage holds"));
}

TEST_F(RecipeTest, T5PipelinesEncoderAndDecoderLayersTogether) {
  const auto c = compile_text(kMinimalRecipe, {"model.arch=t5", "model.decoder_num_layers=4",
                                               "data.decoder_seq_length=16", "parallel.pipeline=2",
                                               "cluster.gpus_per_node=2"});
  EXPECT_EQ(c.derived.decoder_num_layers, 4);
  EXPECT_EQ(c.derived.decoder_seq_length, 16);
  EXPECT_THAT(c.derived.layers_per_stage, ElementsAre(4, 4));
}

TEST_F(RecipeTest, BucketSizeDefaultsToMegatronsFortyMillionGrowingWithDataParallelRanks) {
  const auto small = compile_text(kMinimalRecipe, {"cluster.gpus_per_node=2"});
  EXPECT_EQ(small.derived.ddp_bucket_size, 40'000'000);
  ASSERT_NE(find(small.derived, "ddp bucket size"), nullptr);
  EXPECT_EQ(find(small.derived, "ddp bucket size")->how,
            "max(40,000,000, 1,000,000 x data-parallel size 2)");
  const auto wide = compile_text(kMinimalRecipe, {"cluster.nodes=8", "cluster.gpus_per_node=8",
                                                  "training.global_batch_size=128"});
  EXPECT_EQ(wide.derived.ddp_bucket_size, 64'000'000);
}

TEST_F(RecipeTest, AGivenBucketSizeIsUsedAsItIsWithoutANote) {
  const auto c = compile_text(kMinimalRecipe, {"parallel.ddp_bucket_size=1000"});
  EXPECT_EQ(c.derived.ddp_bucket_size, 1000);
  EXPECT_EQ(find(c.derived, "ddp bucket size"), nullptr);
}

TEST_F(RecipeTest, WsdDecaysOverATenthOfTheDecayIterationsUnlessTold) {
  const auto c = compile_text(kMinimalRecipe, {"training.train_iters=1005",
                                               "training.lr_decay_style=wsd"});
  EXPECT_EQ(c.derived.lr_wsd_decay_iters, 100);
  EXPECT_EQ(find(c.derived, "lr wsd decay iterations")->how,
            "decay iterations 1005 / 10, rounded down");
  const auto told = compile_text(kMinimalRecipe, {"training.train_iters=1000",
                                                  "training.lr_decay_style=wsd",
                                                  "training.lr_wsd_decay_iters=300"});
  EXPECT_EQ(told.derived.lr_wsd_decay_iters, 300);
  EXPECT_EQ(find(told.derived, "lr wsd decay iterations"), nullptr);
}

TEST_F(RecipeTest, OtherDecayStylesHaveNoWsdPhase) {
  const auto c = compile_text(kMinimalRecipe, {"training.train_iters=1000"});
  EXPECT_EQ(c.derived.lr_wsd_decay_iters, 0);
}

}  // namespace
}  // namespace megatron::recipe
