// Derived values: what the recipe implies, each with the arithmetic that produced it.
#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;

const Derivation* find(const Derived& d, const std::string& name) {
  for (const auto& x : d.log)
    if (x.name == name) return &x;
  return nullptr;
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

TEST_F(RecipeTest, T5DecoderLayersAndLengthAreTheirOwnKeys) {
  const auto c = compile_text(kMinimalRecipe, {"model.arch=t5", "model.decoder_num_layers=4",
                                               "data.decoder_seq_length=16", "parallel.pipeline=2",
                                               "cluster.gpus_per_node=2"});
  EXPECT_EQ(c.derived.decoder_num_layers, 4);
  EXPECT_EQ(c.derived.decoder_seq_length, 16);
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
