// Compiling recipes: defaults, types, composition through base:, overrides and references.
#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;

TEST_F(RecipeTest, MinimalRecipeTakesDefaultsForEverythingElse) {
  const auto c = compile_text(kMinimalRecipe);
  EXPECT_EQ(c.recipe.model.hidden_size, 128);
  EXPECT_EQ(c.recipe.model.arch, Arch::Gpt);
  EXPECT_EQ(c.recipe.parallel.tensor, 1);
  EXPECT_EQ(c.recipe.precision.dtype, DType::F32);
  EXPECT_DOUBLE_EQ(c.recipe.training.adam_beta2, 0.999);
  EXPECT_EQ(c.recipe.training.lr_decay_style, LrDecay::Cosine);
}

TEST_F(RecipeTest, RecordsTheLineAndColumnOfEveryValueSet) {
  const auto c = compile_text(kMinimalRecipe);
  const Origin& o = c.provenance.at("model.hidden_size");
  EXPECT_EQ(o.file, file());
  EXPECT_EQ(o.line, 3);
  EXPECT_EQ(o.column, 16);
  EXPECT_FALSE(c.provenance.contains("model.arch"));
}

TEST_F(RecipeTest, EnumsAcceptMegatronNamesCaseInsensitively) {
  const auto c = compile_text(std::string(kMinimalRecipe) +
                              "precision:\n  dtype: FP16\n"
                              "parallel:\n  schedule: 1F1B\n",
                              {"data.tokenizer=GPT2BPETokenizer", "training.optimizer=adam"});
  EXPECT_EQ(c.recipe.precision.dtype, DType::F16);
  EXPECT_EQ(c.recipe.data.tokenizer, Tokenizer::Gpt2Bpe);
  EXPECT_EQ(c.recipe.training.optimizer, Optimizer::AdamW);
}

TEST_F(RecipeTest, IntegersMayBeWrittenWithUnderscoresOrExponents) {
  const auto c = compile_text(kMinimalRecipe, {"training.train_tokens=300_000_000",
                                               "training.train_samples=null",
                                               "checkpoint.interval=1e3"});
  EXPECT_EQ(c.recipe.training.train_tokens, 300000000);
  EXPECT_EQ(c.recipe.checkpoint.interval, 1000);
}

TEST_F(RecipeTest, ABaseRecipeIsOverriddenKeyByKey) {
  dir_.write("base/common.yaml",
             "model:\n  hidden_size: 64\n  num_attention_heads: 2\ntraining:\n  lr: 0.5\n");
  const auto c = compile_text(std::string("base: base/common.yaml\n") + kMinimalRecipe);
  EXPECT_EQ(c.recipe.model.hidden_size, 128);  // the file wins over its base
  const auto only_base = compile_text(
      "base: base/common.yaml\nmodel:\n  num_layers: 2\n  vocab_size: 10\ndata:\n  seq_length: 8\n"
      "training:\n  micro_batch_size: 1\n  global_batch_size: 1\n");
  EXPECT_EQ(only_base.recipe.model.hidden_size, 64);
  EXPECT_DOUBLE_EQ(only_base.recipe.training.lr, 0.5);
  EXPECT_THAT(only_base.provenance.at("training.lr").file, HasSubstr("common.yaml"));
}

TEST_F(RecipeTest, BasesAreFollowedRecursivelyRelativeToEachFile) {
  dir_.write("a/grand.yaml", "training:\n  lr: 0.25\n  seed: 7\n");
  dir_.write("a/parent.yaml", "base: grand.yaml\ntraining:\n  seed: 8\n");
  const auto c = compile_text(std::string("base: a/parent.yaml\n") + kMinimalRecipe +
                              "  seed: 9\n");
  EXPECT_EQ(c.recipe.training.seed, 9);
  const auto inherited = compile_text(
      std::string("base: a/parent.yaml\n") +
      "model:\n  num_layers: 1\n  hidden_size: 8\n  num_attention_heads: 1\n  vocab_size: 4\n"
      "data:\n  seq_length: 4\ntraining:\n  micro_batch_size: 1\n  global_batch_size: 1\n");
  EXPECT_EQ(inherited.recipe.training.seed, 8);
  EXPECT_DOUBLE_EQ(inherited.recipe.training.lr, 0.25);
}

TEST_F(RecipeTest, SeveralBasesApplyInOrder) {
  dir_.write("one.yaml", "training:\n  seed: 1\n  lr: 0.1\n");
  dir_.write("two.yaml", "training:\n  seed: 2\n");
  const auto c = compile_text(
      "base: [one.yaml, two.yaml]\nmodel:\n  num_layers: 1\n  hidden_size: 8\n"
      "  num_attention_heads: 1\n  vocab_size: 4\ndata:\n  seq_length: 4\n"
      "training:\n  micro_batch_size: 1\n  global_batch_size: 1\n");
  EXPECT_EQ(c.recipe.training.seed, 2);
  EXPECT_DOUBLE_EQ(c.recipe.training.lr, 0.1);
}

TEST_F(RecipeTest, OverridesWinOverTheFileAndApplyInOrder) {
  const auto c = compile_text(kMinimalRecipe, {"model.hidden_size=256", "training.lr=3e-4",
                                               "model.hidden_size=512"});
  EXPECT_EQ(c.recipe.model.hidden_size, 512);
  EXPECT_DOUBLE_EQ(c.recipe.training.lr, 3e-4);
  EXPECT_EQ(c.provenance.at("model.hidden_size").describe(), "override 'model.hidden_size=512'");
}

TEST_F(RecipeTest, OverridesTakeYamlListsAndNullUnsetsAnOptionalValue) {
  const auto c = compile_text(std::string(kMinimalRecipe) + "  train_iters: 10\n",
                              {"data.prefixes=[a, b]", "data.weights=[0.25, 0.75]",
                               "training.train_iters=null", "training.train_samples=80"});
  EXPECT_THAT(c.recipe.data.prefixes, ::testing::ElementsAre("a", "b"));
  EXPECT_FALSE(c.recipe.training.train_iters.has_value());
  EXPECT_EQ(c.derived.train_iters, 10);
}

TEST_F(RecipeTest, AWholeValueReferenceKeepsTheReferencedType) {
  const auto c = compile_text(std::string(kMinimalRecipe) +
                              "  seed: ${model.hidden_size}\n");
  EXPECT_EQ(c.recipe.training.seed, 128);
}

TEST_F(RecipeTest, ReferencesSeeOverridesAndSpliceIntoText) {
  const auto c = compile_text(std::string(kMinimalRecipe) +
                                  "checkpoint:\n  save: runs/h${model.hidden_size}-s${training.seed}\n",
                              {"model.hidden_size=256"});
  EXPECT_EQ(c.recipe.checkpoint.save, "runs/h256-s1234");  // seed from the default
}

TEST_F(RecipeTest, ReferencesChainThroughOtherReferences) {
  const auto c = compile_text(std::string(kMinimalRecipe) +
                              "  seed: ${eval.iters}\neval:\n  iters: ${model.num_layers}\n");
  EXPECT_EQ(c.recipe.training.seed, 4);
}

TEST_F(RecipeTest, AnEmptySectionSetsNothing) {
  const auto c = compile_text(std::string(kMinimalRecipe) + "checkpoint:\n");
  EXPECT_FALSE(c.recipe.checkpoint.save.has_value());
}

}  // namespace
}  // namespace megatron::recipe
