// Every recipe shipped in recipes/ compiles; the GPT-3 175B one has Megatron's settings.
#include <filesystem>

#include "recipe/recipe_test_util.hpp"

namespace megatron::recipe {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> shipped_recipes() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(fs::path(MEGATRON_SOURCE_DIR) / "recipes"))
    if (entry.path().extension() == ".yaml") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShippedRecipes, AllTheFamiliesAreShipped) {
  std::vector<std::string> names;
  for (const auto& p : shipped_recipes()) names.push_back(p.stem().string());
  for (const char* wanted : {"gpt-tiny", "gpt-125m", "gpt-1.3b", "gpt-175b", "bert-base",
                             "bert-large", "t5-base", "llama-7b", "llama-70b"})
    EXPECT_NE(std::find(names.begin(), names.end(), wanted), names.end()) << wanted;
}

TEST(ShippedRecipes, EveryRecipeCompiles) {
  for (const auto& path : shipped_recipes()) {
    SCOPED_TRACE(path.string());
    EXPECT_NO_THROW(compile(path));
  }
}

TEST(ShippedRecipes, Gpt175bHasMegatronsPublishedSettings) {
  const auto c = compile(fs::path(MEGATRON_SOURCE_DIR) / "recipes/gpt-175b.yaml");
  const Recipe& r = c.recipe;
  EXPECT_EQ(r.model.num_layers, 96);
  EXPECT_EQ(r.model.hidden_size, 12288);
  EXPECT_EQ(r.model.num_attention_heads, 96);
  EXPECT_EQ(r.data.seq_length, 2048);
  EXPECT_EQ(c.derived.padded_vocab_size, 51200);
  EXPECT_EQ(r.parallel.tensor, 8);
  EXPECT_EQ(r.parallel.pipeline, 16);
  EXPECT_EQ(r.training.micro_batch_size, 1);
  EXPECT_EQ(r.training.global_batch_size, 1536);
  EXPECT_EQ(r.precision.dtype, DType::F16);
  EXPECT_DOUBLE_EQ(r.training.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(r.training.adam_beta2, 0.95);
  EXPECT_DOUBLE_EQ(r.training.lr, 6e-5);
  EXPECT_DOUBLE_EQ(r.training.min_lr, 6e-6);
  EXPECT_EQ(r.training.lr_decay_style, LrDecay::Cosine);
  EXPECT_DOUBLE_EQ(r.training.clip_grad, 1.0);
  EXPECT_DOUBLE_EQ(r.training.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(r.model.init_method_std, 0.006);
  EXPECT_EQ(r.cluster.nodes * r.cluster.gpus_per_node, 1024);
}

}  // namespace
}  // namespace megatron::recipe
