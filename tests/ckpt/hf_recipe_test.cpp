// The recipe a Hugging Face import writes describes the imported model exactly: compiled and read
// by plan::model_config (what every job and the export read), it gives the model back.
#include "ckpt/hf_recipe.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "hf_fixtures.hpp"
#include "plan/model_config.hpp"
#include "recipe/compile.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {

model::ModelConfig read_back(const HfModel& imported) {
  test_support::TempDir dir;
  const auto file = dir.path() / "recipe.yaml";
  std::ofstream(file) << hf_recipe_yaml(imported, tensor::DType::F32, "no/such/dir");
  const recipe::CompiledRecipe c = recipe::compile(file, {.world_from_layout = true});
  return plan::model_config(c.recipe, c.derived);
}

// Every field the export and the engine read from the model's description.
void expect_same_model(const model::ModelConfig& got, const model::ModelConfig& want) {
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.decoder_layers, want.decoder_layers);
  EXPECT_EQ(got.hidden, want.hidden);
  EXPECT_EQ(got.heads, want.heads);
  EXPECT_EQ(got.groups, want.groups);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.ffn, want.ffn);
  EXPECT_EQ(got.vocab, want.vocab);
  EXPECT_EQ(got.position, want.position);
  if (want.position == model::PositionEmbedding::Rotary) {
    EXPECT_EQ(got.rotary_base, want.rotary_base);
    EXPECT_EQ(got.rotary_percent, want.rotary_percent);
    EXPECT_EQ(got.rope_scaling, want.rope_scaling);
    if (want.rope_scaling != model::RopeScaling::None) EXPECT_EQ(got.rope_scaling_factor, want.rope_scaling_factor);
    if (want.rope_scaling == model::RopeScaling::Llama3) {
      EXPECT_EQ(got.rope_original_max_positions, want.rope_original_max_positions);
      EXPECT_EQ(got.rope_low_freq_factor, want.rope_low_freq_factor);
      EXPECT_EQ(got.rope_high_freq_factor, want.rope_high_freq_factor);
    }
  }
  EXPECT_EQ(got.sliding_window, want.sliding_window);
  if (want.position == model::PositionEmbedding::Relative) {
    EXPECT_EQ(got.relative_buckets, want.relative_buckets);
    EXPECT_EQ(got.relative_max_distance, want.relative_max_distance);
  } else {
    EXPECT_EQ(got.max_positions, want.max_positions);
  }
  EXPECT_EQ(got.norm, want.norm);
  EXPECT_DOUBLE_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.activation, want.activation);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
  EXPECT_EQ(got.linear_bias, want.linear_bias);
  EXPECT_EQ(got.qkv_bias, want.qkv_bias);
  EXPECT_EQ(got.causal, want.causal);
  EXPECT_EQ(got.encoder_decoder, want.encoder_decoder);
}

TEST(HfRecipe, AGpt2ImportsRecipeDescribesTheImportedModel) {
  const model::ModelConfig c = test_support::hf_tiny_gpt2();
  expect_same_model(read_back({.arch = HfArch::Gpt2, .config = c}), c);
}

TEST(HfRecipe, ALlamaImportsRecipeDescribesTheImportedModel) {
  const model::ModelConfig c = test_support::hf_tiny_llama();
  expect_same_model(read_back({.arch = HfArch::Llama, .config = c}), c);
}

// The keys an import writes for today's families act: Qwen2's query/key/value biases, Llama
// 3.1's scaled rotary frequencies, Mistral's window.
TEST(HfRecipe, Qwen2Llama31AndMistralImportsRecipesDescribeTheImportedModels) {
  const model::ModelConfig qwen = test_support::hf_tiny_qwen2();
  expect_same_model(read_back({.arch = HfArch::Qwen2, .config = qwen}), qwen);
  model::ModelConfig llama31 = test_support::hf_tiny_llama();
  llama31.rope_scaling = model::RopeScaling::Llama3;
  llama31.rope_scaling_factor = 32.0;
  llama31.rope_original_max_positions = 64;
  llama31.rope_low_freq_factor = 2.0;
  llama31.rope_high_freq_factor = 8.0;
  expect_same_model(read_back({.arch = HfArch::Llama, .config = llama31}), llama31);
  model::ModelConfig linear = test_support::hf_tiny_llama();
  linear.rope_scaling = model::RopeScaling::Linear;
  linear.rope_scaling_factor = 4.0;
  expect_same_model(read_back({.arch = HfArch::Llama, .config = linear}), linear);
  model::ModelConfig mistral = test_support::hf_tiny_llama();
  mistral.sliding_window = 16;
  expect_same_model(read_back({.arch = HfArch::Mistral, .config = mistral}), mistral);
}

TEST(HfRecipe, AT5ImportsRecipeDescribesTheImportedModel) {
  const model::ModelConfig c = test_support::hf_tiny_t5();
  expect_same_model(read_back({.arch = HfArch::T5, .config = c}), c);
}

}  // namespace
}  // namespace megatron::ckpt
