// The `megatron` command as users meet it: exit codes, one-line errors, version, recipe tools.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace cli_test {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(Cli, VersionPrintsVersionCommitAndBuildOptions) {
  const auto r = run_megatron("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("megatron 0.1.0 (commit "));
  EXPECT_THAT(r.out, HasSubstr("\ncuda: "));
  EXPECT_THAT(r.out, HasSubstr("\nblas: "));
  EXPECT_THAT(r.out, HasSubstr("\nmpi: "));
}

TEST(Cli, HelpListsTheSubcommands) {
  const auto r = run_megatron("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("plan"));
  EXPECT_THAT(r.out, HasSubstr("recipe"));
}

TEST(Cli, UnknownFlagIsOneErrorLineWithExitCode2) {
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: "));
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

TEST(Cli, BadRecipeValueIsOneLineWithTheOverrideAndExitCode2) {
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml model.hidden_size=wide");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "megatron: error: override 'model.hidden_size=wide': model.hidden_size: expected an "
            "integer in [1, 1048576], got 'wide'\n");
}

TEST(Cli, CrossFieldErrorNamesTheRecipeLine) {
  const auto r = run_megatron("plan recipes/gpt-175b.yaml --nodes 100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: recipes/gpt-175b.yaml:17:11: tensor 8 x pipeline "
                                "16 x context 1 = 128 ranks per model replica does not divide the "
                                "world size 800"));
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

TEST(Cli, MissingRecipeFileIsABadInput) {
  const auto r = run_megatron("plan recipes/nope.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: recipe file 'recipes/nope.yaml' does not exist\n");
}

TEST(Cli, UnknownHardwareListsTheProfiles) {
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --hardware tpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: override 'cluster.hardware=tpu': "));
  EXPECT_THAT(r.err, HasSubstr("h100-sxm"));
}

TEST(Cli, RecipeShowPrintsTheResolvedRecipeWithOrigins) {
  const auto r = run_megatron("recipe show recipes/gpt-tiny.yaml training.lr=5e-4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  num_layers: 4  # recipes/gpt-tiny.yaml:"));
  EXPECT_THAT(r.out, HasSubstr("  adam_beta2: 0.95  # recipes/base/gpt.yaml:"));
  EXPECT_THAT(r.out, HasSubstr("  lr: 0.0005  # override 'training.lr=5e-4'"));
}

TEST(Cli, RecipeSchemaJsonIsValidJsonSchema) {
  const auto r = run_megatron("recipe schema --json");
  EXPECT_EQ(r.exit_code, 0);
  const auto schema = nlohmann::json::parse(r.out);
  EXPECT_EQ(schema["properties"]["training"]["properties"]["lr"]["type"], "number");
}

TEST(Cli, RecipeSchemaMarkdownIsTheReference) {
  const auto r = run_megatron("recipe schema --markdown");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("# Recipe reference"));
}

TEST(Cli, PlanJsonOfGpt175bHasTheExactParameterCount) {
  const auto r = run_megatron("plan recipes/gpt-175b.yaml --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["parameters"]["total"].get<int64_t>(), 174615846912);
  EXPECT_EQ(plan["layout"]["tp"], 8);
  EXPECT_EQ(plan["layout"]["pp"], 16);
  EXPECT_EQ(plan["layout"]["dp"], 8);
  for (const char* key : {"weights", "gradients", "optimizer", "activations", "total"})
    EXPECT_GT(plan["memory"]["peak_rank"][key].get<double>(), 0) << key;
  EXPECT_GT(plan["flops"]["model_per_iteration"].get<double>(), 0);
  EXPECT_GT(plan["flops"]["hardware_per_iteration"].get<double>(), 0);
  EXPECT_EQ(plan["tokens_per_iteration"].get<int64_t>(), 1536 * 2048);
  EXPECT_GT(plan["schedule"]["bubble_fraction"].get<double>(), 0);
  EXPECT_GT(plan["estimate"]["step_time_s"].get<double>(), 0);
  EXPECT_GT(plan["estimate"]["mfu"].get<double>(), 0);
  EXPECT_LT(plan["estimate"]["mfu"].get<double>(), 1);
}

TEST(Cli, PlanRankShowsWhatOneRankOfGpt175bHoldsAndRuns) {
  // Rank 1023 = tp 7, dp 7, pp 15: the last stage, layers 90-95, 1536 / (1 x 8 dp) = 192
  // micro-batches, which the last stage alternates from the start.
  const auto r = run_megatron("plan recipes/gpt-175b.yaml --rank 1023");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("Rank 1023 of 1024: tensor 7, context 0, data 7, pipeline stage 15 "
                                "of 16\n  chunk 0 (model chunk 15): layers 90-95\n"));
  EXPECT_THAT(r.out, HasSubstr("Program (1f1b, 192 micro-batches, 1 chunk): 384 ops, 0 warm-up "
                               "forwards, at most 1 chunk activation alive\n  F(c0,mb0) B(c0,mb0) "
                               "F(c0,mb1) B(c0,mb1)"));
}

TEST(Cli, PlanRankOutsideTheLayoutIsRefusedWithTheRankCount) {
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --rank 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: --rank 1: the layout has 1 rank (0..0)\n");
  EXPECT_EQ(run_megatron("plan recipes/gpt-tiny.yaml --rank -1").exit_code, 2);
}

TEST(Cli, PlanFlagsOverrideTheClusterSection) {
  const auto r = run_megatron("plan recipes/gpt-1.3b.yaml --nodes 2 --gpus-per-node 8 --hardware h200 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["layout"]["world"], 16);
  EXPECT_EQ(plan["layout"]["dp"], 16);
  EXPECT_EQ(plan["estimate"]["hardware"], "h200");
}

TEST(Cli, EveryShippedRecipePlansAsTextAndJson) {
  for (const char* name : {"gpt-tiny", "gpt-125m", "gpt-1.3b", "gpt-175b", "bert-base",
                           "bert-large", "t5-base", "llama-7b", "llama-70b"}) {
    SCOPED_TRACE(name);
    const auto text = run_megatron(std::string("plan recipes/") + name + ".yaml");
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("Parameters"));
    const auto json = run_megatron(std::string("plan recipes/") + name + ".yaml --json");
    EXPECT_EQ(json.exit_code, 0) << json.err;
    EXPECT_TRUE(nlohmann::json::accept(json.out));
  }
}

// Under the sanitize preset every rank of an MPI job runs without LeakSanitizer's
// __tls_get_addr interceptor, whose misreading of Open MPI's thread-locals crashed its tracer at
// exit (src/sanitizer_defaults.cpp): the binary itself carries that default.
TEST(Cli, SanitizerBuildsLeaveTlsGetAddrUnintercepted) {
#ifndef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "not built with AddressSanitizer (the sanitize preset)";
#else
  const auto r = run_megatron_with_env("ASAN_OPTIONS=help=1", "--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Intercept __tls_get_addr. (Current Value: false)"));
#endif
}

// logging.level sets the training log's level; --log-level on the command line wins.
TEST(Cli, TheRecipesLogLevelActsUnlessTheCommandLineGivesOne) {
  test_support::TempDir dir;
  const std::string run = " run recipes/gpt-tiny.yaml model.num_layers=1 training.train_iters=1 "
                          "training.lr_warmup_iters=0 eval.interval=null logging.level=warn --threads 1 --run-dir ";
  const auto quiet = run_megatron(run + (dir.path() / "a").string());
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.out.find("[info]"), std::string::npos) << quiet.out;
  const auto told = run_megatron("--log-level info" + run + (dir.path() / "b").string());
  ASSERT_EQ(told.exit_code, 0) << told.err;
  EXPECT_NE(told.out.find("[info]"), std::string::npos) << told.out;
}

// A shipped recipe without data says how to make some for its tokenizer, and how to use it.
TEST(Cli, ARunWithoutDataPrintsThePreprocessCommandForItsTokenizer) {
  test_support::TempDir dir;
  const auto r = run_megatron("run recipes/gpt-tiny.yaml data.mock=false --threads 1 --run-dir " +
                              (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("megatron preprocess --input data/corpora/austen.jsonl --output-prefix "
                               "data/austen --tokenizer gpt2-bpe"));
  EXPECT_THAT(r.err, HasSubstr("'data.prefixes=[data/austen_text_document]'"));
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

}  // namespace cli_test
}  // namespace megatron::cli
