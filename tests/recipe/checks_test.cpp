// Cross-field checks show their arithmetic and point at the field to change.
#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

using ::testing::HasSubstr;

TEST_F(RecipeTest, HeadsMustDivideByTensorParallelSize) {
  EXPECT_EQ(error_of(std::string(kMinimalRecipe) + "parallel:\n  tensor: 3\ncluster:\n  gpus_per_node: 3\n"),
            file() + ":13:11: model.num_attention_heads (4) is not divisible by parallel.tensor (3): "
                     "4 % 3 = 1; each tensor-parallel rank needs whole heads, so use a tensor size "
                     "among 1, 2, 4");
}

TEST_F(RecipeTest, AttentionThatStoresTheScoresIsRefusedBecauseTheEngineHasNone) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.flash_attention=false"}),
            "override 'model.flash_attention=false': model.flash_attention: false asks for "
            "attention that stores the sequence x sequence scores, which this engine does not "
            "have: it always runs the memory-efficient kernel (same results, less memory); remove "
            "the key or set it to true");
}

TEST_F(RecipeTest, SequenceLongerThanLearnedPositionsIsRejected) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.max_position_embeddings=32"}),
              HasSubstr("data.seq_length (64) exceeds model.max_position_embeddings (32)"));
  // Rotary embeddings have no table, so any length is fine.
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.max_position_embeddings=32",
                                      "model.position_embedding=rope"}),
            "");
}

// The decoder reads the same learned table: past its end it would train on zeros.
TEST_F(RecipeTest, T5DecoderLongerThanLearnedPositionsIsRejectedAtItsKey) {
  std::string text = kMinimalRecipe;
  text.replace(text.find("  seq_length: 64\n"), 17, "  seq_length: 64\n  decoder_seq_length: 96\n");
  EXPECT_EQ(error_of(text, {"model.arch=t5", "model.max_position_embeddings=64"}),
            file() + ":8:23: data.decoder_seq_length (96) exceeds model.max_position_embeddings "
                     "(64): learned positions only cover 64 tokens; raise max_position_embeddings "
                     "or shorten decoder_seq_length");
}

TEST_F(RecipeTest, T5DecoderLengthIsUnboundedWithRelativePositions) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.arch=t5", "model.position_embedding=relative",
                                      "data.decoder_seq_length=96"}),
            "");
}

// Mock BERT data draws its words past [PAD], [CLS], [SEP] and [MASK] (ids 0..3).
TEST_F(RecipeTest, MockBertDataNeedsTwoWordIdsBesideItsSpecialTokens) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=bert", "data.mock=true", "model.vocab_size=5"}),
              HasSubstr("model.vocab_size (5) leaves fewer than 2 word ids beside the 4 special "
                        "tokens of mock BERT data ([PAD], [CLS], [SEP], [MASK]); raise it to at "
                        "least 6"));
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.arch=bert", "data.mock=true", "model.vocab_size=6"}), "");
}

TEST_F(RecipeTest, QueryGroupsMustDivideByTensorParallelSize) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.num_query_groups=1", "parallel.tensor=2",
                                        "cluster.gpus_per_node=2"}),
              HasSubstr("model.num_query_groups (1) is not divisible by parallel.tensor (2): 1 % 2 = 1"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.num_query_groups=3"}),
              HasSubstr("model.num_attention_heads (4) is not a multiple of num_query_groups (3)"));
}

TEST_F(RecipeTest, SequenceParallelNeedsTensorParallelism) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"parallel.sequence_parallel=true"}),
              HasSubstr("needs parallel.tensor > 1"));
}

TEST_F(RecipeTest, OnlyOneTrainingLengthMayBeGiven) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"training.train_iters=10", "training.train_samples=100"}),
              HasSubstr("give only one of training.train_iters, train_samples and train_tokens"));
  EXPECT_THAT(error_of(std::string(kMinimalRecipe) + "  train_iters: 10\n  train_samples: 100\n"),
              HasSubstr("give only one of training.train_iters, train_samples and train_tokens"));
}

TEST_F(RecipeTest, AnOverrideOfTheTrainingLengthReplacesTheFiles) {
  const std::string samples = std::string(kMinimalRecipe) + "  train_samples: 1000\n";
  const CompiledRecipe c = compile_text(samples, {"training.train_iters=10"});
  EXPECT_EQ(c.recipe.training.train_iters, 10);
  EXPECT_FALSE(c.recipe.training.train_samples.has_value());
  // A recipe built on a base replaces the base's length the same way.
  dir_.write("base.yaml", samples);
  const CompiledRecipe child = compile_text("base: base.yaml\ntraining:\n  train_tokens: 64000\n", {}, "child.yaml");
  EXPECT_EQ(child.recipe.training.train_tokens, 64000);
  EXPECT_FALSE(child.recipe.training.train_samples.has_value());
  // The warmup, given as a fraction or in iterations, likewise.
  const CompiledRecipe warm = compile_text(std::string(kMinimalRecipe) + "  train_iters: 100\n  lr_warmup_fraction: 0.1\n",
                                           {"training.lr_warmup_iters=5"});
  EXPECT_EQ(warm.recipe.training.lr_warmup_iters, 5);
  EXPECT_FALSE(warm.recipe.training.lr_warmup_fraction.has_value());
}

TEST_F(RecipeTest, BlendWeightsNeedOnePerDataset) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"data.prefixes=[a, b]", "data.weights=[1]"}),
              HasSubstr("data.weights has 1 entries but data.prefixes has 2"));
}

TEST_F(RecipeTest, SlurmTimeLimitFormatIsChecked) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"cluster.time_limit=2-00:00:00"}), "");
  EXPECT_THAT(error_of(kMinimalRecipe, {"cluster.time_limit=2 days"}),
              HasSubstr("is not a Slurm time"));
}

TEST_F(RecipeTest, RelativePositionsAreT5sAndTheirKeysNeedThem) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.position_embedding=relative"}),
              HasSubstr("relative is T5's relative position bias"));
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.arch=t5", "model.position_embedding=relative",
                                      "model.relative_attention_num_buckets=16",
                                      "model.relative_attention_max_distance=64"}),
            "");
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=t5", "model.relative_attention_num_buckets=16"}),
              HasSubstr("only used with model.position_embedding: relative"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=t5", "model.position_embedding=relative",
                                        "model.relative_attention_max_distance=16"}),
              HasSubstr("must exceed half the buckets"));
}

TEST_F(RecipeTest, RopeScalingNeedsRotaryPositionsAndItsKeysNeedIt) {
  const std::vector<std::string> rope{"model.position_embedding=rope"};
  const auto with = [&](std::initializer_list<std::string> more) {
    std::vector<std::string> all = rope;
    all.insert(all.end(), more);
    return all;
  };
  EXPECT_EQ(error_of(kMinimalRecipe, with({"model.rope_scaling=llama3"})), "");
  EXPECT_EQ(error_of(kMinimalRecipe, with({"model.rope_scaling=llama3", "model.rope_scaling_factor=32",
                                           "model.rope_original_max_position_embeddings=4096",
                                           "model.rope_low_freq_factor=2", "model.rope_high_freq_factor=8"})),
            "");
  EXPECT_EQ(error_of(kMinimalRecipe, with({"model.rope_scaling=linear", "model.rope_scaling_factor=2"})), "");
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.rope_scaling=llama3"}), HasSubstr("needs model.position_embedding: rope"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling_factor=8"})),
              HasSubstr("model.rope_scaling_factor is only used with model.rope_scaling: linear, llama3 or yarn"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=linear", "model.rope_scaling_factor=2",
                                             "model.rope_low_freq_factor=2"})),
              HasSubstr("model.rope_low_freq_factor is only used with model.rope_scaling: llama3"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=linear"})),
              HasSubstr("linear needs model.rope_scaling_factor"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=llama3", "model.rope_high_freq_factor=1"})),
              HasSubstr("must exceed model.rope_low_freq_factor"));
  // yarn: the factor required; its own keys, and the trained context it shares with llama3.
  EXPECT_EQ(error_of(kMinimalRecipe, with({"model.rope_scaling=yarn", "model.rope_scaling_factor=4",
                                           "model.rope_original_max_position_embeddings=64",
                                           "model.rope_beta_fast=16", "model.rope_beta_slow=2",
                                           "model.rope_truncate=false", "model.rope_attention_factor=1.1"})),
            "");
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=yarn"})),
              HasSubstr("yarn needs model.rope_scaling_factor"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=llama3", "model.rope_beta_fast=16"})),
              HasSubstr("model.rope_beta_fast is only used with model.rope_scaling: yarn"));
  EXPECT_THAT(error_of(kMinimalRecipe, with({"model.rope_scaling=yarn", "model.rope_scaling_factor=4",
                                             "model.rope_low_freq_factor=2"})),
              HasSubstr("model.rope_low_freq_factor is only used with model.rope_scaling: llama3"));
}

TEST_F(RecipeTest, SequencesPastTheSlidingWindowAreRefused) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"model.position_embedding=rope", "model.sliding_window=4096"}), "");
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.sliding_window=8"}),
              HasSubstr("exceeds model.sliding_window (8): the engine computes full attention"));
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=bert", "model.sliding_window=4096"}),
              HasSubstr("arch: gpt only"));
}

TEST_F(RecipeTest, MaskingSettingsAreOnlyForBertAndT5) {
  for (const char* o : {"data.mask_prob=0.2", "data.short_seq_prob=0.2", "data.masking_max_ngram=2",
                        "data.masking_full_word=false", "data.vocab_extra_ids=10"}) {
    const std::string key = std::string(o).substr(0, std::string(o).find('='));
    EXPECT_THAT(error_of(kMinimalRecipe, {o}), HasSubstr(key + " is only used by arch: bert and t5"));
    EXPECT_EQ(error_of(kMinimalRecipe, {"model.arch=bert", o}), "") << o;
    EXPECT_EQ(error_of(kMinimalRecipe, {"model.arch=t5", o}), "") << o;
  }
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=bert", "data.masking_max_ngram=65"}),
              HasSubstr("data.masking_max_ngram"));
}

TEST_F(RecipeTest, DecoderSettingsAreOnlyForT5) {
  EXPECT_THAT(error_of(kMinimalRecipe, {"model.decoder_num_layers=2"}),
              HasSubstr("model.decoder_num_layers is only used by arch: t5"));
}

// Packed documents are GPT's: a BERT or T5 sample holds one document, so the keys would act on
// nothing there.
TEST_F(RecipeTest, PackedDocumentKeysAreRefusedOutsideGpt) {
  for (const char* key : {"data.reset_position_ids", "data.reset_attention_mask", "data.eod_mask_loss"}) {
    EXPECT_THAT(error_of(kMinimalRecipe, {"model.arch=bert", std::string(key) + "=true"}),
                HasSubstr(std::string(key) + " is only used by arch: gpt"));
  }
  const CompiledRecipe gpt = compile_text(kMinimalRecipe, {"data.reset_attention_mask=true"});
  EXPECT_TRUE(gpt.recipe.data.reset_attention_mask);
  EXPECT_FALSE(gpt.recipe.data.reset_position_ids);
}

// Fine-tuning keys act only with the format that reads them, and only with fine-tuning data.
TEST_F(RecipeTest, FinetuneKeysOfAnotherFormatOrWithoutDataAreRefused) {
  const std::vector<std::string> sft = {"finetune.format=sft", "finetune.train_data=qa.jsonl",
                                        "data.prefixes=[]", "data.mock=false"};
  auto with = [&](std::vector<std::string> overrides, const std::string& more) {
    overrides.push_back(more);
    return error_of(kMinimalRecipe, overrides);
  };
  EXPECT_THAT(with(sft, "finetune.messages_field=turns"),
              HasSubstr("finetune.messages_field is not read by finetune.format: sft"));
  EXPECT_THAT(with(sft, "finetune.source_field=src"),
              HasSubstr("finetune.source_field is not read by finetune.format: sft"));
  EXPECT_THAT(with(sft, "finetune.labels=[a, b]"), HasSubstr("finetune.labels is not read by finetune.format: sft"));
  EXPECT_THAT(with({}, "finetune.valid_data=v.jsonl"),
              HasSubstr("finetune.valid_data belongs to fine-tuning: set finetune.train_data too"));
  EXPECT_THAT(with({}, "finetune.format=seq2seq"),
              HasSubstr("finetune.format belongs to fine-tuning: set finetune.train_data too"));
  EXPECT_THAT(with({"finetune.format=seq2seq", "finetune.train_data=p.jsonl", "data.prefixes=[]",
                    "data.mock=false"}, "model.arch=gpt"),
              HasSubstr("finetune.format: seq2seq trains an encoder-decoder (arch: t5)"));
  const CompiledRecipe ok = compile_text(kMinimalRecipe, {sft[0], sft[1], sft[2], sft[3], "finetune.pack=false"});
  EXPECT_FALSE(ok.recipe.finetune.pack);
  EXPECT_EQ(ok.derived.classes, 0);  // a language model, not a classifier
}

TEST_F(RecipeTest, AProfileOfNoRankIsRefused) {
  EXPECT_EQ(error_of(kMinimalRecipe, {"logging.profile=true", "logging.profile_ranks=[]"}),
            "override 'logging.profile_ranks=[]': logging.profile_ranks is empty, so no rank "
            "would profile: list at least one rank (e.g. [0]) or set logging.profile to false");
  EXPECT_EQ(error_of(kMinimalRecipe, {"logging.profile_ranks=[]"}), "");  // not profiling
}

}  // namespace
}  // namespace megatron::recipe
