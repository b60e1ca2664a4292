// `megatron run --smoke`: every shipped recipe that trains runs shrunk on the CPU, so a recipe
// that no longer compiles or trains fails here rather than on its hardware.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace smoke_test {

using ::testing::HasSubstr;

// Every shipped recipe: all of them train.
std::vector<std::string> training_recipes() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MEGATRON_SOURCE_DIR) + "/recipes")) {
    if (entry.path().extension() == ".yaml") out.push_back("recipes/" + entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Smoke, EveryShippedRecipeRunsShrunkOnTheCpu) {
  const auto recipes = training_recipes();
  ASSERT_GE(recipes.size(), 11u);
  for (const std::string& recipe : recipes) {
    SCOPED_TRACE(recipe);
    test_support::TempDir dir;
    const auto r = run_megatron("run " + recipe + " --smoke --threads 1 --run-dir " + dir.path().string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(dir.path() / "metrics.jsonl");
    int iterations = 0;
    for (std::string line; std::getline(in, line);) {
      const auto m = nlohmann::json::parse(line);
      iterations = m["iteration"].get<int>();
      EXPECT_TRUE(std::isfinite(m["lm_loss"].get<double>())) << line;
      if (recipe.find("bert") != std::string::npos) EXPECT_TRUE(m.contains("sop_loss")) << line;
    }
    EXPECT_EQ(iterations, 3);
  }
}

TEST(Smoke, KeepsWhatMakesTheRecipeAndShrinksTheRest) {
  test_support::TempDir dir;
  const auto r = run_megatron("run recipes/llama-70b.yaml --smoke --threads 1 --run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir.path() / "recipe.yaml");
  std::stringstream text;
  text << in.rdbuf();
  // Llama's own: RMSNorm, SwiGLU, rotary, no biases, bf16, grouped attention (8 query heads per
  // group in the recipe: as grouped as 4 heads allow).
  for (const char* kept : {"normalization: rmsnorm", "activation: swiglu", "position_embedding: rope",
                           "add_bias_linear: false", "dtype: bf16", "num_query_groups: 1"})
    EXPECT_THAT(text.str(), HasSubstr(kept));
  for (const char* shrunk : {"num_layers: 2", "hidden_size: 64", "tensor: 1", "pipeline: 1", "mock: true"})
    EXPECT_THAT(text.str(), HasSubstr(shrunk));
}

// The example fine-tunes the tiny BERT pre-trained by its first step, which a smoke run has not
// made (and whose weights would not fit the shrunk model anyway).
TEST(Smoke, FineTuningRecipeRunsWithoutItsPretrainedWeights) {
  test_support::TempDir dir;
  const auto r = run_megatron("run examples/sentiment/finetune.yaml --smoke --threads 1 --run-dir " +
                              dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("runs/pretrain) is not loaded"));
}

TEST(Smoke, ABertVocabularyWithoutRoomForMockWordsIsRefusedAtTheKey) {
  const auto r = run_megatron("run recipes/bert-tiny.yaml --smoke model.vocab_size=5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("model.vocab_size (5) leaves fewer than 2 word ids beside the 4 "
                               "special tokens of mock BERT data"));
}

TEST(Smoke, IsOneProcess) {
  const auto r = run_megatron("run recipes/gpt-tiny.yaml --smoke --nproc 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: --smoke runs on one process: drop --nproc\n");
}

}  // namespace smoke_test
}  // namespace megatron::cli
