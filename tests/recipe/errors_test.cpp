// Every kind of bad recipe fails with one line naming the file:line:col and what would fix it.
#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(RecipeTest, UnknownKeyNamesItsPositionAndTheClosestValidName) {
  const std::string e = error_of(
      "model:\n  num_layers: 4\n  hiden_size: 128\n  num_attention_heads: 4\n");
  EXPECT_EQ(e, file() + ":3:3: unknown key 'hiden_size' in section model: (did you mean hidden_size?)");
}

TEST_F(RecipeTest, KeyInTheWrongSectionSaysWhereItBelongs) {
  const std::string e = error_of(std::string(kMinimalRecipe) + "  seq_length: 64\n");
  EXPECT_THAT(e, StartsWith(file() + ":12:3: unknown key 'seq_length' in section training:"));
  EXPECT_THAT(e, HasSubstr("belongs in section data:, as data.seq_length"));
}

TEST_F(RecipeTest, UnknownSectionSuggestsTheClosestSection) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "trainig:\n  lr: 1\n"),
            file() + ":12:1: unknown section 'trainig' (did you mean training?); sections are "
                     "model, parallel, precision, training, data, checkpoint, logging, eval, "
                     "finetune, cluster");
}

TEST_F(RecipeTest, WrongTypeNamesTheExpectedTypeAndWhatWasFound) {
  EXPECT_EQ(error_of("model:\n  num_layers: four\n"),
            file() + ":2:15: model.num_layers: expected an integer in [1, 100000], got 'four'");
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.lr=[1, 2]"}),
              HasSubstr("training.lr: expected a number > 0, got a list"));
  EXPECT_THAT(error_of(std::string(kMinimalRecipe) + "parallel:\n  sequence_parallel: maybe\n"),
              HasSubstr(":13:22: parallel.sequence_parallel: expected true or false, got 'maybe'"));
}

TEST_F(RecipeTest, FractionalValueForAnIntegerIsATypeError) {
  EXPECT_THAT(
      error_of(kMinimalRecipe, {"training.micro_batch_size=2.5"}),
      HasSubstr("training.micro_batch_size: expected an integer in [1, 100000000], got '2.5'"));
}

TEST_F(RecipeTest, UnknownChoiceListsTheChoicesAndTheClosestOne) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "precision:\n  dtype: bf61\n"),
            file() + ":13:10: precision.dtype: 'bf61' is not one of f32, bf16, f16 (did you mean bf16?)");
}

TEST_F(RecipeTest, ValueOutOfRangeStatesTheBound) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "eval:\n  iters: 0\n"),
            file() + ":13:10: eval.iters: 0 is out of range: it must be >= 1");
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.hidden_dropout=1.5"}),
              HasSubstr("model.hidden_dropout: 1.5 is out of range: it must be <= 1"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.tensor=0"}),
              HasSubstr("override 'parallel.tensor=0': parallel.tensor: 0 is out of range: it must be >= 1"));
}

TEST_F(RecipeTest, MissingRequiredKeyPointsAtItsSection) {
  EXPECT_THAT(error_of("model:\n  num_layers: 4\n  hidden_size: 8\n  num_attention_heads: 2\n"),
              StartsWith(file() + ":1:1: missing required key model.vocab_size"));
}

TEST_F(RecipeTest, MissingRequiredSectionPointsAtTheFile) {
  EXPECT_THAT(error_of("model:\n  num_layers: 4\n  hidden_size: 8\n  num_attention_heads: 2\n"
                       "  vocab_size: 10\n"),
              StartsWith(file() + ": missing required key training.micro_batch_size; add it under "
                                    "training: (Sequences per micro-batch per rank. Symbol b.)"));
}

TEST_F(RecipeTest, DuplicateKeysAreRejected) {
  EXPECT_EQ(error_of("model:\n  num_layers: 4\n  num_layers: 5\n"),
            file() + ":3:3: duplicate key 'num_layers' in section model:");
}

TEST_F(RecipeTest, InvalidYamlReportsTheParserPosition) {
  EXPECT_THAT(error_of("model:\n  num_layers: [4\n"), StartsWith(file() + ":3:1: invalid YAML: "));
}

TEST_F(RecipeTest, ARecipeMustBeAMapping) {
  EXPECT_THAT(error_of("- model\n"), HasSubstr("a recipe is a mapping of sections"));
}

TEST_F(RecipeTest, MissingRecipeFileIsNamed) {
  CompileOptions options;
  EXPECT_THROW(
      {
        try {
          compile(dir_.path() / "nope.yaml", options);
        } catch (const UserError& e) {
          EXPECT_THAT(e.what(), HasSubstr("nope.yaml' does not exist"));
          throw;
        }
      },
      UserError);
}

TEST_F(RecipeTest, MissingBaseFileNamesTheBaseLine) {
  EXPECT_EQ(error_of(std::string("base: gone.yaml\n") + kMinimalRecipe),
            file() + ":1:7: recipe file '" + (dir_.path() / "gone.yaml").string() +
                "' does not exist");
}

TEST_F(RecipeTest, BaseCycleIsAnErrorShowingTheChain) {
  dir_.write("a.yaml", "base: b.yaml\n");
  dir_.write("b.yaml", "base: a.yaml\n");
  const std::string e = error_of("base: a.yaml\n");
  EXPECT_THAT(e, HasSubstr("b.yaml:1:7: base recipes form a cycle: "));
  EXPECT_THAT(e, HasSubstr("a.yaml -> ")) << e;
}

TEST_F(RecipeTest, RecipeThatIsItsOwnBaseIsACycle) {
  EXPECT_THAT(error_of("base: recipe.yaml\n"), HasSubstr("base recipes form a cycle"));
}

TEST_F(RecipeTest, OverrideWithoutEqualsSignShowsTheForm) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"training.lr"}),
            "override 'training.lr' is not of the form section.key=value (e.g. training.lr=3e-4)");
}

TEST_F(RecipeTest, OverrideOfAnUnknownKeySuggestsTheClosest) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"training.lrr=1"}),
            "override 'training.lrr=1': unknown key 'lrr' in section training: (did you mean lr?)");
  EXPECT_THAT(error_of(kMinimalRecipe, {"modle.hidden_size=1"}),
              HasSubstr("unknown section 'modle' (did you mean model?)"));
  EXPECT_EQ(error_of(kMinimalRecipe, {"seed=1"}),
            "override 'seed=1': 'seed' is not a section.key path (e.g. training.lr=3e-4) (did you "
            "mean training.seed?)");
}

TEST_F(RecipeTest, OverrideIsTypeCheckedAgainstTheSchema) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"parallel.tensor=two"}),
            "override 'parallel.tensor=two': parallel.tensor: expected an integer in [1, 1000000], "
            "got 'two'");
}

TEST_F(RecipeTest, ReferenceToAnUnknownKeySuggestsTheClosest) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "  seed: ${model.hiden_size}\n"),
            file() + ":12:9: ${model.hiden_size} names no recipe key (did you mean model.hidden_size?)");
}

TEST_F(RecipeTest, ReferenceCycleIsAnError) {
  EXPECT_THAT(error_of(std::string(kMinimalRecipe) + "  seed: ${eval.iters}\neval:\n  iters: ${training.seed}\n"),
              HasSubstr("${...} references form a cycle"));
}

TEST_F(RecipeTest, ReferenceToAnUnsetValueIsAnError) {
  EXPECT_THAT(error_of(std::string(kMinimalRecipe) + "checkpoint:\n  load: ${checkpoint.save}\n"),
              HasSubstr("${checkpoint.save} refers to checkpoint.save, which is not set"));
}

}  // namespace
}  // namespace megatron::recipe

namespace megatron::recipe {
namespace {

TEST_F(RecipeTest, LogLevelIsOneOfSpdlogsLevels) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"logging.level=loud"}),
            "override 'logging.level=loud': logging.level: 'loud' is not one of trace, debug, "
            "info, warn, error");
  EXPECT_EQ(compile_text(kMinimalRecipe, {"logging.level=WARNING"}).recipe.logging.level,
            LogLevel::Warn);
}

}  // namespace
}  // namespace megatron::recipe
