// The recipe a Hugging Face import writes describes the imported model exactly: compiled and read
// by plan::model_config (what every job and the export read), it gives the model back.
#include "ckpt/hf_recipe.hpp"

#include "ckpt/hf_generation_config.hpp"
#include "core/error.hpp"

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
    if (want.rope_scaling == model::RopeScaling::Yarn) {
      EXPECT_EQ(got.rope_original_max_positions, want.rope_original_max_positions);
      EXPECT_EQ(got.rope_beta_fast, want.rope_beta_fast);
      EXPECT_EQ(got.rope_beta_slow, want.rope_beta_slow);
      EXPECT_EQ(got.rope_truncate, want.rope_truncate);
      EXPECT_EQ(got.rope_attention_factor, want.rope_attention_factor);
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
  EXPECT_EQ(got.qk_norm, want.qk_norm);
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
  model::ModelConfig yarn = test_support::hf_tiny_qwen2();
  yarn.rope_scaling = model::RopeScaling::Yarn;
  yarn.rope_scaling_factor = 4.0;
  yarn.rope_original_max_positions = 16;
  yarn.rope_beta_fast = 16.0;
  yarn.rope_truncate = false;
  yarn.rope_attention_factor = 1.25;
  expect_same_model(read_back({.arch = HfArch::Qwen2, .config = yarn}), yarn);
  const model::ModelConfig qwen3 = test_support::hf_tiny_qwen3();
  expect_same_model(read_back({.arch = HfArch::Qwen3, .config = qwen3}), qwen3);
}

// meta-llama/Llama-3.1-8B-Instruct's generation_config.json, and Qwen/Qwen2.5-0.5B-Instruct's.
const char* kLlama31Instruct = R"({"bos_token_id": 128000, "do_sample": true,
  "eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9,
  "transformers_version": "4.42.3"})";
const char* kQwen25Instruct = R"({"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true,
  "eos_token_id": [151645, 151643], "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8,
  "top_k": 20, "transformers_version": "4.37.0"})";

recipe::GenerationSection generation_read_back(const char* generation_config, int64_t vocab) {
  test_support::TempDir dir;
  std::ofstream(dir.path() / "generation_config.json") << generation_config;
  model::ModelConfig c = test_support::hf_tiny_llama();
  c.vocab = vocab;
  c.padded_vocab = (vocab + 127) / 128 * 128;
  const auto file = dir.path() / "recipe.yaml";
  std::ofstream(file) << hf_recipe_yaml({.arch = HfArch::Llama, .config = c}, tensor::DType::F32,
                                        dir.path().string());
  return recipe::compile(file, {.world_from_layout = true}).recipe.generation;
}

TEST(HfRecipe, GenerationConfigsEndTokensAndSamplingBecomeTheGenerationSection) {
  const recipe::GenerationSection llama = generation_read_back(kLlama31Instruct, 128256);
  EXPECT_EQ(llama.stop_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(llama.do_sample, true);
  EXPECT_EQ(llama.temperature, 0.6);
  // transformers' default top_k (50) applies too when sampling, before top_p.
  EXPECT_EQ(llama.top_k, 50);
  EXPECT_EQ(llama.top_p, 0.9);
  const recipe::GenerationSection qwen = generation_read_back(kQwen25Instruct, 151936);
  EXPECT_EQ(qwen.stop_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(qwen.top_k, 20);
  EXPECT_EQ(qwen.top_p, 0.8);
  // transformers' own save of a base model: greedy, no end tokens.
  const recipe::GenerationSection base =
      generation_read_back(R"({"_from_model_config": true, "transformers_version": "5.25.0"})", 1000);
  EXPECT_TRUE(base.stop_token_ids.empty());
  EXPECT_EQ(base.do_sample, false);
}

TEST(HfRecipe, AnExportsGenerationConfigImportsAsTheSectionItCameFrom) {
  const recipe::GenerationSection sampled{
      .stop_token_ids = {7, 50256}, .do_sample = true, .temperature = 0.7, .top_k = 40, .top_p = 0.95};
  const nlohmann::json j = hf_generation_config(sampled, 50256);
  // The tokenizer's end of document first, each id once.
  EXPECT_EQ(j["eos_token_id"], nlohmann::json({50256, 7}));
  const recipe::GenerationSection back = generation_read_back(j.dump().c_str(), 50257);
  EXPECT_EQ(back.stop_token_ids, (std::vector<int64_t>{50256, 7}));
  EXPECT_EQ(back.do_sample, true);
  EXPECT_EQ(back.temperature, 0.7);
  EXPECT_EQ(back.top_k, 40);
  EXPECT_EQ(back.top_p, 0.95);
  // Ours: top_k and top_p 0 are off; transformers': top_k 0 and top_p 1.
  const nlohmann::json all = hf_generation_config({.do_sample = true}, std::nullopt);
  EXPECT_EQ(all, nlohmann::json::parse(R"({"do_sample": true, "temperature": 1.0, "top_k": 0, "top_p": 1.0})"));
  // Temperature 0 is greedy, which transformers spells do_sample false.
  EXPECT_EQ(hf_generation_config({.temperature = 0.0}, 2), nlohmann::json::parse(R"({"eos_token_id": 2, "do_sample": false})"));
  // Nothing known, nothing written: transformers' defaults.
  EXPECT_TRUE(hf_generation_config({}, std::nullopt).is_null());
}

TEST(HfRecipe, GenerationSettingsTheEngineDoesNotApplyAreNamedInTheRecipe) {
  const HfGenerationDefaults g =
      hf_generation_defaults(nlohmann::json::parse(kQwen25Instruct), "dir/generation_config.json", 151936);
  EXPECT_EQ(g.not_applied, std::vector<std::string>{"repetition_penalty = 1.05"});
  EXPECT_NE(generation_yaml(g).find("# Not applied by generate or serve (transformers applies it): "
                                    "repetition_penalty = 1.05"),
            std::string::npos);
  // Settings at which transformers computes the same are not named.
  EXPECT_TRUE(hf_generation_defaults(nlohmann::json::parse(R"({"repetition_penalty": 1.0, "num_beams": 1})"),
                                     "g.json", 10)
                  .not_applied.empty());
}

TEST(HfRecipe, ABadGenerationConfigIsRefusedNamingTheFileAndKey) {
  const auto refusal = [](const char* text, int64_t vocab) -> std::string {
    try {
      hf_generation_defaults(nlohmann::json::parse(text), "dir/generation_config.json", vocab);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal(R"({"eos_token_id": [1, 200]})", 100),
            "dir/generation_config.json: eos_token_id 200 is outside the model's 100 tokens");
  EXPECT_EQ(refusal(R"({"eos_token_id": -1})", 100),
            "dir/generation_config.json: eos_token_id -1 is outside the model's 100 tokens");
  EXPECT_EQ(refusal(R"({"eos_token_id": "2"})", 100),
            "dir/generation_config.json: eos_token_id = \"2\": expected a token id or a list of them");
  EXPECT_EQ(refusal(R"({"temperature": -1})", 100),
            "dir/generation_config.json: temperature = -1: expected a number from 0 to 100");
  EXPECT_EQ(refusal(R"({"do_sample": 1})", 100),
            "dir/generation_config.json: do_sample = 1: expected true or false");
  EXPECT_EQ(refusal(R"([1])", 100), "dir/generation_config.json: expected a JSON object");
}

TEST(HfRecipe, AT5ImportsRecipeDescribesTheImportedModel) {
  const model::ModelConfig c = test_support::hf_tiny_t5();
  expect_same_model(read_back({.arch = HfArch::T5, .config = c}), c);
}

}  // namespace
}  // namespace megatron::ckpt
