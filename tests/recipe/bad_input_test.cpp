// Bad input that once crashed, hung or printed wrapped numbers: each class ends in one error
// line naming the key (docs/recipe-language.md, "What bad input gets").
#include <cmath>

#include "recipe/codec.hpp"
#include "recipe/recipe_test_util.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST_F(RecipeTest, AValueAboveItsCeilingIsRefusedWithTheCeilingAndWhyItExists) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.num_layers=1000000000"}),
            "override 'model.num_layers=1000000000': model.num_layers: 1000000000 is out of "
            "range: it must be <= 100000, a ceiling far above any real job that keeps the "
            "compiler's and planner's arithmetic exact");
}

TEST_F(RecipeTest, EveryCeilingRefusesTheValueJustAboveIt) {
  for (const FieldSpec& f : fields()) {
    if (!f.maximum_is_ceiling) continue;
    const bool integer = f.kind == ValueKind::Integer || f.kind == ValueKind::IntegerList;
    const std::string above = integer ? std::to_string(static_cast<int64_t>(*f.maximum) + 1)
                                      : codec::bound_text(*f.maximum * 2);
    EXPECT_THAT(error_of(kMinimalRecipe, {f.path + "=" + above}),
                HasSubstr(f.path + ": " + above + " is out of range: it must be <= " +
                          codec::bound_text(*f.maximum) + ", a ceiling"))
        << f.path;
  }
}

TEST_F(RecipeTest, TheSizesThatFeedProductsAllHaveCeilings) {
  for (const char* path : {"model.num_layers",
                           "model.decoder_num_layers",
                           "model.hidden_size",
                           "model.num_attention_heads",
                           "model.num_query_groups",
                           "model.kv_channels",
                           "model.ffn_hidden_size",
                           "model.vocab_size",
                           "model.make_vocab_size_divisible_by",
                           "model.max_position_embeddings",
                           "parallel.tensor",
                           "parallel.pipeline",
                           "parallel.context",
                           "parallel.data",
                           "parallel.virtual_pipeline",
                           "parallel.layers_per_stage",
                           "training.micro_batch_size",
                           "training.global_batch_size",
                           "training.train_iters",
                           "training.train_samples",
                           "training.train_tokens",
                           "training.rampup_batch_size",
                           "training.lr_warmup_iters",
                           "training.lr_decay_iters",
                           "data.seq_length",
                           "data.decoder_seq_length",
                           "eval.iters",
                           "cluster.nodes",
                           "cluster.gpus_per_node",
                           "parallel.timeout_minutes"}) {
    ASSERT_NE(find_field(path), nullptr) << path;
    EXPECT_TRUE(find_field(path)->maximum_is_ceiling) << path;
  }
}

TEST_F(RecipeTest, AnIntegerOutOfRangeIsShownExactlyAsWritten) {
  // 2^53 + 1 has no double; the message must not show 9007199254740992.
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.hidden_size=9007199254740993"}),
              HasSubstr("model.hidden_size: 9007199254740993 is out of range: it must be <= "
                        "1048576,"));
}

TEST_F(RecipeTest, AnIntegerPast64BitsSaysSoAndWhatIsExpected) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"cluster.nodes=99999999999999999999999"}),
            "override 'cluster.nodes=99999999999999999999999': cluster.nodes: "
            "99999999999999999999999 does not fit in a 64-bit integer; expected an integer in "
            "[1, 1000000]");
}

TEST_F(RecipeTest, ALayoutWhoseRankCountOverflowsIsAnErrorAtTheKey) {
  CompileOptions options;
  options.world_from_layout = true;
  options.overrides = {"parallel.tensor=1000000", "parallel.pipeline=1000000",
                       "parallel.context=1000000", "parallel.data=1000000"};
  try {
    compile(dir_.write("r.yaml", kMinimalRecipe), options);
    FAIL() << "compiled";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "override 'parallel.data=1000000': the ranks of the layout (parallel.tensor x "
              "pipeline x context x data) overflows: 1000000000000000000 x 1000000 is too "
              "large; make parallel.data smaller");
  }
}

TEST_F(RecipeTest, ATrainingLengthWhoseSampleCountOverflowsIsAnErrorAtTrainIters) {
  const std::string e = error_of(kMinimalRecipe, {"training.global_batch_size=100000000",
                                                  "training.train_iters=1000000000000000"});
  EXPECT_THAT(e, StartsWith("override 'training.train_iters=1000000000000000': the samples "
                            "trained on (iterations x global batch) overflows"));
  EXPECT_THAT(e, EndsWith("; make training.train_iters smaller"));
}

TEST_F(RecipeTest, ARampOverTheLargestSampleCountDerivesWithoutWalkingEachIteration) {
  // 10^15 samples at batches of 1 to 10^6 were 10^9 and more steps one iteration at a time.
  const auto c = compile_text(kMinimalRecipe,
                              {"training.micro_batch_size=1", "training.global_batch_size=1000000",
                               "training.rampup_batch_size=[1, 1, 1000000000000000]",
                               "training.train_samples=1000000000000000"});
  EXPECT_GT(c.derived.train_iters, 1'000'000'000);
  EXPECT_LT(c.derived.train_iters, 1'000'000'000'000'000);
}

TEST_F(RecipeTest, ASecondYamlDocumentIsRefusedWhereItStarts) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "---\nmodel:\n  num_layers: 8\n"),
            file() +
                ":12:1: a recipe is one YAML document, but a second one starts here and "
                "would be ignored; remove this `---` and merge what follows into the first "
                "document (or put it in its own file and name that in base:)");
}

TEST_F(RecipeTest, ADocumentMarkerWithNothingAfterItIsHarmless) {
  EXPECT_EQ(error_of("---\n" + std::string(kMinimalRecipe) + "---\n"), "");
}

TEST_F(RecipeTest, AnOverrideValueOfTwoDocumentsIsRefused) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"training.lr=1\n---\n2"}),
            "override 'training.lr=1\\n---\\n2': the value holds more than one YAML document; "
            "give one value");
}

TEST_F(RecipeTest, BinaryBytesFromARecipeAreEscapedInTheError) {
  const std::string e =
      error_of(std::string(kMinimalRecipe) + "precision:\n  dtype: \"\\x01\\xff\"\n");
  // The control byte is escaped; U+00FF (YAML's "\xff") is valid UTF-8 and kept.
  EXPECT_THAT(e, HasSubstr("precision.dtype: '\\x01\xc3\xbf' is not one of"));
  EXPECT_THAT(e, Not(HasSubstr("\x01")));
}

TEST_F(RecipeTest, ALongUnknownKeyIsCutInTheError) {
  const std::string key(1000, 'k');  // YAML's longest plain key is 1024
  const std::string e = error_of(std::string(kMinimalRecipe) + "  " + key + ": 1\n");
  EXPECT_THAT(e, HasSubstr("unknown key 'kkkk"));
  EXPECT_LT(e.size(), 400u);
}

TEST_F(RecipeTest, AVeryLongSplitIsRefusedLikeAnyMalformedOne) {
  // std::regex recursed once per character: 200,000 digits overflowed the stack.
  EXPECT_THAT(error_of(kMinimalRecipe, {"data.split=" + std::string(200'000, '1')}),
              HasSubstr("data.split '1111"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.time_limit=" + std::string(200'000, '1')}),
              HasSubstr("is not a Slurm time"));
}

TEST_F(RecipeTest, YamlNestedTooDeeplySaysSo) {
  EXPECT_THAT(error_of(std::string(kMinimalRecipe) + "eval:\n  iters: " +
                       std::string(100'000, '[') + std::string(100'000, ']') + "\n"),
              HasSubstr("invalid YAML: nested too deeply"));
  EXPECT_THAT(error_of(kMinimalRecipe,
                       {"data.prefixes=" + std::string(100'000, '[') + std::string(100'000, ']')}),
              HasSubstr("the value is not valid YAML: nested too deeply"));
}

TEST_F(RecipeTest, ReferencesThatGrowAValueWithoutBoundAreRefused) {
  // Each of these string keys splices the previous one 16 times: 16^6 copies of "x".
  const char* chain[] = {"cluster.partition",       "cluster.account", "logging.run_dir",
                         "logging.tensorboard_dir", "checkpoint.save", "checkpoint.load"};
  std::string text = std::string(kMinimalRecipe);
  std::vector<std::string> overrides = {std::string(chain[0]) + "=x"};
  for (std::size_t i = 1; i < std::size(chain); ++i) {
    std::string value;
    for (int k = 0; k < 16; ++k) value += std::string("${") + chain[i - 1] + "}";
    overrides.push_back(std::string(chain[i]) + "=" + value);
  }
  EXPECT_THAT(error_of(text, overrides),
              HasSubstr("${...} references make this value longer than 65536 bytes"));
}

}  // namespace
}  // namespace megatron::recipe
