// `megatron recipe from-megatron`: Megatron-LM command lines become recipes that compile and
// describe the same model as the shipped ones; what cannot be translated is said, never dropped.
#include <filesystem>

#include "recipe/from_megatron.hpp"
#include "recipe/megatron_examples.hpp"
#include "recipe/megatron_flags.hpp"
#include "recipe/recipe_test_util.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

namespace fs = std::filesystem;
namespace ex = megatron_examples;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The smallest command line the translation accepts: every essential flag, nothing else.
const std::vector<std::string> kEssentials{
    "--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
    "--seq-length", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10"};

std::vector<std::string> essentials_and(const std::vector<std::string>& more) {
  return ex::concat(kEssentials, more);
}

class FromMegatron : public RecipeTest {
 protected:
  CompiledRecipe translate(const std::vector<std::string>& words,
                           const std::optional<std::string>& family = "gpt") {
    last_ = from_megatron(words, family);
    return compile_text(last_.yaml);
  }

  static CompiledRecipe shipped(const std::string& name) {
    return compile(fs::path(MEGATRON_SOURCE_DIR) / "recipes" / name);
  }

  // The message of the UserError the translation throws ("" if none).
  static std::string refusal(const std::vector<std::string>& words,
                             const std::optional<std::string>& family = "gpt") {
    try {
      from_megatron(words, family);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }

  static std::optional<std::string> value_of(const CompiledRecipe& c, const std::string& path) {
    return find_field(path)->render(c.recipe);
  }

  MegatronTranslation last_;
};

// Every model.* key, except those listed, has the same value in both recipes (the position
// table compared by its size, which an unset key takes from data.seq_length).
void expect_same_model(const CompiledRecipe& a, const CompiledRecipe& b,
                       const std::vector<std::string>& except = {}) {
  for (const FieldSpec& field : fields()) {
    if (field.section != "model" || field.path == "model.max_position_embeddings" ||
        std::find(except.begin(), except.end(), field.path) != except.end())
      continue;
    EXPECT_EQ(field.render(a.recipe), field.render(b.recipe)) << field.path;
  }
  auto positions = [](const Recipe& r) {
    return r.model.max_position_embeddings.value_or(r.data.seq_length);
  };
  EXPECT_EQ(positions(a.recipe), positions(b.recipe));
}

TEST_F(FromMegatron, Gpt3_175bExampleDescribesTheModelAndLayoutOfTheShippedRecipe) {
  const auto converted = translate(ex::kGpt3_175b);
  const auto recipe = shipped("gpt-175b.yaml");
  expect_same_model(converted, recipe);
  EXPECT_EQ(converted.derived.padded_vocab_size, recipe.derived.padded_vocab_size);
  EXPECT_EQ(converted.recipe.parallel.tensor, 8);
  EXPECT_EQ(converted.recipe.parallel.pipeline, 16);
  EXPECT_EQ(converted.recipe.precision.dtype, DType::F16);
}

TEST_F(FromMegatron, Gpt3_175bStepScheduleOfEqualStepsBecomesTheRampUp) {
  const auto converted = translate(ex::kGpt3_175b);
  // 2.4B tokens / 2048 = 1,171,875 samples a step; five steps of 304 reach 1536 at 12B tokens,
  // the ramp length of the shipped recipe.
  EXPECT_THAT(converted.recipe.training.rampup_batch_size, ElementsAre(16, 304, 5859375));
  EXPECT_EQ(converted.recipe.training.rampup_batch_size[2],
            shipped("gpt-175b.yaml").recipe.training.rampup_batch_size[2]);
  EXPECT_EQ(converted.recipe.training.global_batch_size, 1536);
}

TEST_F(FromMegatron, Gpt3_175bExampleKeepsTheDataPathsAndTrainingSettings) {
  const auto c = translate(ex::kGpt3_175b);
  const Recipe& r = c.recipe;
  EXPECT_THAT(r.data.prefixes, ElementsAre("data/gpt_text_document"));
  EXPECT_EQ(value_of(c, "data.vocab_file"), "data/gpt2-vocab.json");
  EXPECT_EQ(r.data.tokenizer, Tokenizer::Gpt2Bpe);
  EXPECT_EQ(r.training.train_iters, 500000);
  EXPECT_EQ(r.training.lr_decay_iters, 430000);
  EXPECT_DOUBLE_EQ(r.training.lr, 6.0e-5);
  EXPECT_EQ(r.training.lr_decay_style, LrDecay::Cosine);
  EXPECT_EQ(r.checkpoint.interval, 10000);
  EXPECT_EQ(r.eval.iters, 10);
  EXPECT_EQ(value_of(c, "logging.tensorboard_dir"), "tb");
}

TEST_F(FromMegatron, Bert340mExampleWithAPipelineThatFitsDescribesBertLarge) {
  const auto converted =
      translate(ex::concat(ex::kBert340m, {"--pipeline-model-parallel-size", "1"}), "bert");
  // Megatron-LM's norm epsilon default is 1e-5; the shipped BERT recipes use BERT's 1e-12.
  expect_same_model(converted, shipped("bert-large.yaml"), {"model.norm_epsilon"});
  EXPECT_DOUBLE_EQ(converted.recipe.model.norm_epsilon, 1e-5);
  EXPECT_EQ(converted.recipe.data.tokenizer, Tokenizer::BertWordPieceLowerCase);
}

TEST_F(FromMegatron, T5_220mExampleDescribesT5Base) {
  const auto converted = translate(ex::kT5_220m, "t5");
  const auto recipe = shipped("t5-base.yaml");
  // Megatron-LM's BERT tokenizer adds [BOS] and [EOS] to the 28,996 + 100: 29,098, as the
  // shipped recipe counts. The example initialises with std 0.015; the shipped recipe keeps the
  // default 0.02.
  expect_same_model(converted, recipe, {"model.init_method_std"});
  EXPECT_EQ(converted.recipe.model.vocab_size, 29098);
  EXPECT_EQ(converted.recipe.data.vocab_extra_ids, 100);
  EXPECT_DOUBLE_EQ(converted.recipe.model.init_method_std, 0.015);
  EXPECT_EQ(converted.derived.padded_vocab_size, recipe.derived.padded_vocab_size);
  EXPECT_EQ(converted.recipe.data.decoder_seq_length, 128);
  EXPECT_EQ(converted.recipe.data.tokenizer, Tokenizer::BertWordPieceCased);
}

TEST_F(FromMegatron, ScriptNameGivesTheModelFamily) {
  std::vector<std::string> words{"pretrain_bert.py"};
  words.insert(words.end(), kEssentials.begin(), kEssentials.end());
  EXPECT_EQ(translate(words, std::nullopt).recipe.model.arch, Arch::Bert);
}

TEST_F(FromMegatron, TorchrunPrefixIsSkippedAndItsWorldBecomesTheCluster) {
  const auto words = ex::concat(ex::concat(ex::kTorchrun8Gpus, {"pretrain_t5.py"}), ex::kT5_220m);
  const auto c = translate(words, std::nullopt);
  EXPECT_EQ(c.recipe.model.arch, Arch::T5);
  EXPECT_EQ(c.recipe.cluster.nodes, 1);
  EXPECT_EQ(c.recipe.cluster.gpus_per_node, 8);
}

TEST_F(FromMegatron, LauncherWorldThatMisfitsTheLayoutGivesOneReplicaAndANote) {
  const auto words =
      ex::concat(ex::concat(ex::kTorchrun8Gpus, {"pretrain_gpt.py"}), ex::kGpt3_175b);
  const auto c = translate(words, std::nullopt);
  EXPECT_EQ(c.recipe.cluster.nodes * c.recipe.cluster.gpus_per_node, 128);
  EXPECT_THAT(::testing::PrintToString(last_.notes), HasSubstr("not a multiple of tensor x pipeline"));
}

TEST_F(FromMegatron, ModelOptionThatContradictsTheScriptIsRefused) {
  EXPECT_EQ(refusal(ex::concat({"pretrain_gpt.py"}, kEssentials), "bert"),
            "--model bert contradicts the script pretrain_gpt.py; keep one");
}

TEST_F(FromMegatron, WithoutScriptOrModelTheFamilyMustBeSaid) {
  EXPECT_THAT(refusal(kEssentials, std::nullopt), HasSubstr("--model gpt|bert|t5"));
}

TEST_F(FromMegatron, Fp16WithBf16IsAContradiction) {
  EXPECT_EQ(refusal(essentials_and({"--fp16", "--bf16"})),
            "--fp16 and --bf16 contradict each other: precision.dtype would be f16 and bf16; keep one");
}

TEST_F(FromMegatron, RopeScalingBecomesLlama3ScalingOfRotaryPositionsOnly) {
  const CompiledRecipe scaled = translate(essentials_and(
      {"--position-embedding-type", "rope", "--use-rope-scaling", "--rope-scaling-factor", "32"}));
  EXPECT_EQ(scaled.recipe.model.rope_scaling, RopeScaling::Llama3);
  EXPECT_EQ(scaled.recipe.model.rope_scaling_factor, 32.0);
  // Megatron ignores it where positions are learned; so does the translation, saying so.
  const CompiledRecipe learned = translate(essentials_and({"--use-rope-scaling"}));
  EXPECT_EQ(learned.recipe.model.rope_scaling, RopeScaling::None);
  EXPECT_THAT(::testing::PrintToString(last_.ignored), HasSubstr("--use-rope-scaling"));
}

TEST_F(FromMegatron, QkLayernormBecomesQkNormsOfAnRmsNormModelAndIsRefusedWithLayerNorm) {
  const CompiledRecipe rms =
      translate(essentials_and({"--qk-layernorm", "--normalization", "RMSNorm"}));
  EXPECT_TRUE(rms.recipe.model.qk_layernorm);
  // Megatron would build LayerNorm q/k norms there; the engine's are RMS norms only.
  try {
    translate(essentials_and({"--qk-layernorm"}));
    ADD_FAILURE() << "LayerNorm q/k norms were accepted";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.qk_layernorm: the query and key norms are RMS norms"));
  }
}

TEST_F(FromMegatron, TrainItersWithTrainSamplesIsRefused) {
  EXPECT_THAT(refusal(essentials_and({"--train-samples", "1000"})),
              HasSubstr("--train-iters and --train-samples exclude each other"));
}

TEST_F(FromMegatron, SwigluWithAnotherActivationIsAContradiction) {
  EXPECT_THAT(refusal(essentials_and({"--swiglu", "--openai-gelu"})),
              HasSubstr("--swiglu and --openai-gelu contradict each other: model.activation"));
}

TEST_F(FromMegatron, RecomputeActivationsWithFullGranularityIsAContradiction) {
  EXPECT_THAT(refusal(essentials_and({"--recompute-activations", "--recompute-granularity", "full"})),
              HasSubstr("contradict each other: training.recompute"));
}

TEST_F(FromMegatron, FlagMissingItsValueIsRefused) {
  EXPECT_EQ(refusal(essentials_and({"--clip-grad"})), "--clip-grad is missing its value");
  EXPECT_EQ(refusal(essentials_and({"--clip-grad", "--fp16"})), "--clip-grad is missing its value");
}

TEST_F(FromMegatron, SwitchGivenAValueIsRefused) {
  EXPECT_EQ(refusal(essentials_and({"--fp16", "yes"})),
            "--fp16 is a switch and takes no value, but was given 'yes'");
  EXPECT_THAT(refusal(essentials_and({"--fp16=yes"})), HasSubstr("--fp16 is a switch"));
}

TEST_F(FromMegatron, SequenceParallelWithoutTensorParallelismIsIgnoredAsMegatronDoes) {
  EXPECT_FALSE(translate(essentials_and({"--sequence-parallel"})).recipe.parallel.sequence_parallel);
  EXPECT_TRUE(translate(essentials_and({"--sequence-parallel", "--tensor-model-parallel-size", "2"}))
                  .recipe.parallel.sequence_parallel);
}

TEST_F(FromMegatron, ValueOfTheWrongTypeNamesTheFlag) {
  EXPECT_EQ(refusal(essentials_and({"--hidden-size", "wide"})),
            "--hidden-size: expected an integer, got 'wide'");
}

TEST_F(FromMegatron, ChoiceWithoutCounterpartIsRefused) {
  EXPECT_THAT(refusal(essentials_and({"--position-embedding-type", "mrope"})),
              HasSubstr("recipes take one of learned, rope, relative"));
}

TEST_F(FromMegatron, FlagThatWouldChangeTheModelIsRefused) {
  EXPECT_THAT(refusal(essentials_and({"--num-experts", "8"})), HasSubstr("--num-experts: mixture-of-experts"));
  EXPECT_THAT(refusal(essentials_and({"--moe-router-topk", "2"})), HasSubstr("--moe-router-topk"));
}

TEST_F(FromMegatron, MissingEssentialsAreNamedTogether) {
  EXPECT_EQ(refusal({"--num-layers", "2"}),
            "a recipe needs --hidden-size, --num-attention-heads, --seq-length or "
            "--encoder-seq-length, --micro-batch-size, --lr, --train-iters or --train-samples "
            "too, which the flags do not give");
}

TEST_F(FromMegatron, UnknownFlagIsListedWithDidYouMeanAndItsValueSkipped) {
  translate(essentials_and({"--hiden-size", "64"}));
  EXPECT_THAT(last_.unknown, ElementsAre("--hiden-size 64 (did you mean --hidden-size?)"));
  EXPECT_THAT(last_.yaml, HasSubstr("#   --hiden-size 64 (did you mean --hidden-size?)"));
}

TEST_F(FromMegatron, FlagWithoutCounterpartIsListedAsNotTranslated) {
  translate(essentials_and({"--no-save-optim"}));
  ASSERT_EQ(last_.untranslated.size(), 1u);
  EXPECT_THAT(last_.untranslated[0], HasSubstr("--no-save-optim: checkpoints here always hold"));
  EXPECT_THAT(last_.yaml, HasSubstr("# Not translated (no counterpart in the recipe):"));
}

TEST_F(FromMegatron, RuntimeFlagIsListedAsIgnored) {
  translate(essentials_and({"--distributed-backend", "nccl", "--use-mcore-models"}));
  ASSERT_EQ(last_.ignored.size(), 2u);
  EXPECT_THAT(last_.ignored[0], HasSubstr("--distributed-backend nccl: "));
  EXPECT_THAT(last_.untranslated, IsEmpty());
}

TEST_F(FromMegatron, RepeatedFlagTakesTheLastValueWithANote) {
  const auto c = translate(essentials_and({"--lr", "2e-3"}));
  EXPECT_DOUBLE_EQ(c.recipe.training.lr, 2e-3);
  EXPECT_THAT(::testing::PrintToString(last_.notes), HasSubstr("--lr is given more than once"));
}

TEST_F(FromMegatron, WeightedDataPathBecomesPrefixesAndWeights) {
  const auto c = translate(essentials_and({"--data-path", "0.3", "a_text_document", "0.7", "b"}));
  EXPECT_THAT(c.recipe.data.prefixes, ElementsAre("a_text_document", "b"));
  EXPECT_THAT(c.recipe.data.weights, ElementsAre(0.3, 0.7));
}

TEST_F(FromMegatron, MegatronDefaultsThatDifferFromTheRecipesAreWritten) {
  const auto c = translate(kEssentials);
  EXPECT_EQ(c.recipe.training.lr_decay_style, LrDecay::Linear);
  EXPECT_EQ(c.recipe.logging.interval, 100);
  EXPECT_EQ(c.recipe.eval.interval, 1000);
  EXPECT_EQ(c.recipe.eval.iters, 100);
  EXPECT_EQ(c.recipe.training.global_batch_size, 2);  // micro batch x one replica
}

TEST_F(FromMegatron, SwigluWithoutFfnWidthTakesMegatronsWidth) {
  const auto c = translate(essentials_and({"--hidden-size", "4096", "--num-attention-heads", "32",
                                           "--swiglu"}));
  EXPECT_EQ(c.recipe.model.ffn_hidden_size, 10880);  // 8 x 4096 / 3 rounded down to 64
}

TEST_F(FromMegatron, GroupQueryAttentionWithoutGroupsIsMultiQuery) {
  EXPECT_EQ(translate(essentials_and({"--group-query-attention"})).recipe.model.num_query_groups, 1);
  EXPECT_EQ(translate(essentials_and({"--group-query-attention", "--num-query-groups", "2"}))
                .recipe.model.num_query_groups,
            2);
}

TEST_F(FromMegatron, QueryGroupsWithoutGroupQueryAttentionAreIgnoredAsMegatronDoes) {
  const auto c = translate(essentials_and({"--num-query-groups", "2"}));
  EXPECT_FALSE(c.recipe.model.num_query_groups.has_value());
  EXPECT_THAT(::testing::PrintToString(last_.ignored), HasSubstr("--num-query-groups 2"));
}

TEST_F(FromMegatron, DecaySamplesBecomeIterationsOfTheGlobalBatchRoundedUp) {
  // gpt-175b.yaml's own arithmetic: 126,953,125 / 1536 and 183,105 / 1536.
  const auto c = translate({"--num-layers", "4", "--hidden-size", "128", "--num-attention-heads",
                            "4", "--seq-length", "64", "--micro-batch-size", "1",
                            "--global-batch-size", "1536", "--lr", "1e-3", "--train-samples",
                            "146484375", "--lr-decay-samples", "126953125",
                            "--lr-warmup-samples", "183105"});
  EXPECT_EQ(c.recipe.training.lr_decay_iters, 82652);
  EXPECT_EQ(c.recipe.training.lr_warmup_iters, 120);
  EXPECT_EQ(c.recipe.training.train_samples, 146484375);
}

TEST_F(FromMegatron, LayersPerVirtualStageBecomeVirtualPipelineChunks) {
  const auto c = translate(essentials_and({"--num-layers", "8", "--pipeline-model-parallel-size",
                                           "2", "--num-layers-per-virtual-pipeline-stage", "2",
                                           "--global-batch-size", "8"}));
  EXPECT_EQ(c.recipe.parallel.virtual_pipeline, 2);
}

TEST_F(FromMegatron, FirstAndLastStageLayersBecomeAnUnevenSplit) {
  const auto c = translate(essentials_and({"--num-layers", "10", "--pipeline-model-parallel-size",
                                           "4", "--decoder-first-pipeline-num-layers", "1",
                                           "--decoder-last-pipeline-num-layers", "1"}));
  EXPECT_THAT(c.recipe.parallel.layers_per_stage, ElementsAre(1, 4, 4, 1));
}

TEST_F(FromMegatron, BlockRecomputeKeepsItsLayerCount) {
  const auto c = translate(essentials_and({"--recompute-granularity", "full", "--recompute-method",
                                           "block", "--recompute-num-layers", "2"}));
  EXPECT_EQ(c.recipe.training.recompute, Recompute::Full);
  EXPECT_EQ(c.recipe.training.recompute_num_layers, 2);
}

TEST_F(FromMegatron, StepScheduleOfUnequalStepsIsRefused) {
  EXPECT_THAT(refusal(essentials_and({"--step-batch-size-schedule", "0:2 640:4 6400:8"})),
              HasSubstr("only a schedule of equal steps"));
}

TEST_F(FromMegatron, SentencePieceWithoutVocabSizeIsRefused) {
  EXPECT_THAT(refusal(essentials_and({"--tokenizer-type", "SentencePieceTokenizer",
                                      "--tokenizer-model", "t.model"})),
              HasSubstr("add --vocab-size N"));
  EXPECT_EQ(translate(essentials_and({"--tokenizer-type", "SentencePieceTokenizer",
                                      "--tokenizer-model", "t.model", "--vocab-size", "32000"}))
                .recipe.model.vocab_size,
            32000);
}

TEST_F(FromMegatron, FamilyFlagOfAnotherScriptIsIgnored) {
  const auto c = translate(essentials_and({"--decoder-seq-length", "32", "--mask-prob", "0.2"}));
  EXPECT_FALSE(c.recipe.data.decoder_seq_length.has_value());
  EXPECT_EQ(last_.ignored.size(), 2u);
}

TEST_F(FromMegatron, WordWithoutFlagIsRefused) {
  EXPECT_EQ(refusal(essentials_and({"--fp16", "--lr", "1", "2"})), "'2' follows no flag that takes a value");
}

TEST_F(FromMegatron, EveryTableKeyIsARecipeKeyEverySwitchTranslatesAndEveryListingSaysWhy) {
  for (const MegatronFlag& flag : megatron_flags()) {
    if (flag.fate != Fate::Key) {
      EXPECT_TRUE(flag.key.empty()) << flag.name;
      EXPECT_EQ(flag.why.empty(), flag.fate == Fate::Special) << flag.name;
      continue;
    }
    SCOPED_TRACE(std::string(flag.name));
    const FieldSpec* field = find_field(std::string(flag.key));
    ASSERT_NE(field, nullptr);
    if (flag.arity == Arity::Switch) {
      // The q/k norms are RMS norms: the switch needs the model's norms to be.
      std::vector<std::string> words =
          flag.name == "--qk-layernorm"
              ? essentials_and({std::string(flag.name), "--normalization", "RMSNorm"})
              : essentials_and({std::string(flag.name)});
      EXPECT_NO_THROW(translate(words));
    }
  }
}

TEST_F(FromMegatron, PackedDocumentFlagsBecomeTheirDataKeys) {
  const auto c = translate(essentials_and({"--mock-data", "--reset-position-ids", "--reset-attention-mask",
                                           "--eod-mask-loss"}));
  EXPECT_TRUE(c.recipe.data.reset_position_ids);
  EXPECT_TRUE(c.recipe.data.reset_attention_mask);
  EXPECT_TRUE(c.recipe.data.eod_mask_loss);
  EXPECT_THAT(last_.untranslated, IsEmpty());
}

TEST_F(FromMegatron, ProfileFlagsBecomeTheLoggingProfileKeys) {
  const CompiledRecipe c = translate(essentials_and({"--profile", "--profile-step-start", "3",
                                                     "--profile-step-end", "5", "--profile-ranks",
                                                     "0", "2"}));
  EXPECT_TRUE(c.recipe.logging.profile);
  EXPECT_EQ(c.recipe.logging.profile_step_start, 3);
  EXPECT_EQ(c.recipe.logging.profile_step_end, 5);
  EXPECT_EQ(c.recipe.logging.profile_ranks, (std::vector<int64_t>{0, 2}));
}

TEST_F(FromMegatron, AProfileRankThatIsNotAnIntegerIsRefused) {
  EXPECT_EQ(refusal(essentials_and({"--profile", "--profile-ranks", "0", "x"})),
            "--profile-ranks: expected integers, got 'x'");
}

}  // namespace
}  // namespace megatron::recipe
