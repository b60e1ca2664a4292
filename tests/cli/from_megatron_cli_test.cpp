// `megatron recipe from-megatron` as users meet it: Megatron-LM's example command lines become
// recipe files that `megatron plan` plans like the shipped recipes; errors are one line, exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "recipe/megatron_examples.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace from_megatron_cli_test {

namespace ex = recipe::megatron_examples;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += " '" + w + "'";
  return out;
}

// `megatron recipe from-megatron -o FILE -- WORDS`.
CommandResult translate(const std::vector<std::string>& words, const std::string& file,
                        const std::string& options = "") {
  return run_megatron("recipe from-megatron " + options + " -o '" + file + "' --" +
                      shell_words(words));
}

int64_t planned_parameters(const std::string& recipe_and_overrides) {
  const auto r = run_megatron("plan " + recipe_and_overrides + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["parameters"]["total"].get<int64_t>();
}

TEST(FromMegatronCli, Gpt3ExampleFromTorchrunPlansTheParametersOfGpt175b) {
  test_support::TempDir dir;
  const std::string file = (dir.path() / "gpt3.yaml").string();
  const auto r = translate(ex::concat(ex::concat(ex::kTorchrun8Gpus, {"pretrain_gpt.py"}),
                                      ex::kGpt3_175b),
                           file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(planned_parameters("'" + file + "'"), planned_parameters("recipes/gpt-175b.yaml"));
}

TEST(FromMegatronCli, Bert340mExampleIsOneErrorLineNamingThePipeline) {
  test_support::TempDir dir;
  const auto r = translate(ex::concat({"pretrain_bert.py"}, ex::kBert340m),
                           (dir.path() / "bert.yaml").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "megatron: error: the recipe these flags translate to does not compile: "
            "model.num_layers (24) do not split evenly over parallel.pipeline (16): 24 % 16 = 8; "
            "change the layout or give an uneven split with parallel.layers_per_stage\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "bert.yaml"));
}

TEST(FromMegatronCli, Bert340mExampleWithAFittingPipelinePlansLikeBertLargeOnItsLayout) {
  test_support::TempDir dir;
  const std::string file = (dir.path() / "bert.yaml").string();
  const auto r = translate(
      ex::concat(ex::concat({"pretrain_bert.py"}, ex::kBert340m), {"--pipeline-model-parallel-size", "1"}),
      file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Tensor parallelism 8 pads the vocabulary to a multiple of 1024: bert-large on that layout.
  EXPECT_EQ(planned_parameters("'" + file + "'"),
            planned_parameters("recipes/bert-large.yaml parallel.tensor=8"));
}

TEST(FromMegatronCli, T5ExamplePlansTheParametersOfT5Base) {
  test_support::TempDir dir;
  const std::string file = (dir.path() / "t5.yaml").string();
  const auto r = translate(ex::concat({"pretrain_t5.py"}, ex::kT5_220m), file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(planned_parameters("'" + file + "'"), planned_parameters("recipes/t5-base.yaml"));
  EXPECT_THAT(r.err, HasSubstr("megatron: ignored, no effect here: --distributed-backend nccl: "));
}

TEST(FromMegatronCli, RecipeGoesToStdoutAndTheListsToStderr) {
  const auto r = run_megatron("recipe from-megatron --model gpt --" +
                              shell_words(ex::concat(ex::kGpt3_175b, {"--no-save-optim", "--hiden-size", "8"})));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("# Translated from Megatron-LM's pretrain_gpt.py flags"));
  EXPECT_THAT(r.out, HasSubstr("\nmodel:\n  arch: gpt"));
  EXPECT_THAT(r.err, HasSubstr("megatron: not translated: --no-save-optim: "));
  EXPECT_THAT(r.err, HasSubstr("megatron: unknown flag, left out: --hiden-size 8 (did you mean --hidden-size?)\n"));
}

TEST(FromMegatronCli, StrictRefusesUntranslatedFlags) {
  test_support::TempDir dir;
  const auto r = translate(ex::concat(ex::kGpt3_175b, {"--no-save-optim"}),
                           (dir.path() / "r.yaml").string(), "--model gpt --strict");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("megatron: error: --strict: 1 flag(s) not translated and 0 unknown"));
}

TEST(FromMegatronCli, ContradictionIsOneErrorLineWithExitCode2) {
  const auto r = run_megatron("recipe from-megatron --model gpt --" +
                              shell_words(ex::concat(ex::kGpt3_175b, {"--bf16"})));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: --fp16 and --bf16 contradict each other: precision.dtype "
                   "would be f16 and bf16; keep one\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace from_megatron_cli_test
}  // namespace megatron::cli
