// Each layer as the Plan runs it (Plan::layers): where it lives, what it is made of
// (model::block_spec) and which kernels run its attention on the run's device.
#include "plan/layers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "plan/placement.hpp"
#include "plan/plan.hpp"
#include "plan/report.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {
namespace layers_test {

using ::testing::HasSubstr;
using tensor::AttentionMask;

Plan plan_of(const std::string& recipe, std::vector<std::string> overrides = {}) {
  overrides.push_back("cluster.hardware=cpu");
  const recipe::CompiledRecipe c = recipe::compile(
      std::string(MEGATRON_SOURCE_DIR) + "/recipes/" + recipe,
      {.overrides = overrides, .world_from_layout = true});
  return make_plan(c, find_hardware("cpu"));
}

TEST(PlanLayers, GptLayersAreCausalFlashAttentionWithACache) {
  const Plan plan = plan_of("gpt-tiny.yaml");
  ASSERT_EQ(int64_t(plan.layers.size()), plan.model.num_layers);
  for (const LayerPlan& layer : plan.layers) {
    EXPECT_EQ(layer.spec.self_attention.mask, AttentionMask::Causal);
    EXPECT_TRUE(layer.spec.self_attention.kv_cache);
    EXPECT_FALSE(layer.spec.self_attention.score_bias);
    EXPECT_FALSE(layer.spec.cross_attention.has_value());
    EXPECT_EQ(layer.self_attention, "cpu flash attention; generation: cached attention");
  }
}

TEST(PlanLayers, LlamaStyleLayersTakeRotaryPositionsAndAGatedMlp) {
  const Plan plan = plan_of("llama-7b.yaml", {"model.num_layers=2"});
  ASSERT_EQ(plan.layers.size(), 2u);
  EXPECT_TRUE(plan.layers[0].spec.self_attention.rotary);
  EXPECT_TRUE(plan.layers[0].spec.mlp.gated());
  EXPECT_EQ(plan.layers[0].spec.norm, model::NormKind::RmsNorm);
}

TEST(PlanLayers, BertLayersSeeEveryUnpaddedKeyAndKeepNoCache) {
  const Plan plan = plan_of("bert-tiny.yaml");
  for (const LayerPlan& layer : plan.layers) {
    EXPECT_EQ(layer.spec.self_attention.mask, AttentionMask::Padding);
    EXPECT_FALSE(layer.spec.self_attention.kv_cache);
  }
}

TEST(PlanLayers, T5DecoderLayersAddCrossAttentionAndEveryStackHasItsScoreBias) {
  const Plan plan = plan_of("t5-tiny.yaml", {"model.position_embedding=relative"});
  const int64_t encoder = plan.model.num_layers;
  ASSERT_EQ(int64_t(plan.layers.size()), encoder + plan.model.decoder_layers);
  for (const LayerPlan& layer : plan.layers) {
    const bool decoder = layer.layer >= encoder;
    EXPECT_EQ(layer.spec.self_attention.mask,
              decoder ? AttentionMask::Causal : AttentionMask::Padding) << layer.layer;
    EXPECT_TRUE(layer.spec.self_attention.score_bias) << layer.layer;
    EXPECT_EQ(layer.spec.cross_attention.has_value(), decoder) << layer.layer;
    EXPECT_EQ(layer.self_attention, "cpu attention over each head's score rows");
    EXPECT_EQ(layer.cross_attention, decoder ? "cpu attention over each head's score rows" : "");
  }
}

TEST(PlanLayers, EachLayerSitsInTheChunkOfItsStageThatHoldsIt) {
  const Plan plan = plan_of("gpt-tiny.yaml", {"parallel.pipeline=2",
                                              "parallel.virtual_pipeline=2"});
  for (const LayerPlan& layer : plan.layers) {
    const auto& held = plan.stages.at(size_t(layer.stage)).chunks.at(size_t(layer.chunk));
    EXPECT_NE(std::find(held.begin(), held.end(), layer.layer), held.end()) << layer.layer;
  }
}

TEST(PlanLayers, OnCudaTheImplementationNamesCudnnAndTheOwnKernel) {
  model::ModelConfig config;
  config.num_layers = 1;
  config.head_dim = 64;
  config.causal = true;
  config.dtype = tensor::DType::Bf16;
  Stage stage;
  stage.chunks = {{0}};
  const std::vector<LayerPlan> layers = plan_layers(config, {stage}, tensor::Device::Cuda);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].self_attention,
            "cuda: cuDNN fused attention, else the flash kernel; generation: cached attention");
}

TEST(PlanLayers, RankReportPrintsTheRanksLayersInRuns) {
  const Plan plan = plan_of("t5-tiny.yaml", {"model.position_embedding=relative"});
  const std::string text = render_rank(plan, 0);
  EXPECT_THAT(text, HasSubstr(": bidirectional self-attention (padding mask) with a "
                              "relative-position bias, gelu MLP, layernorm\n"
                              "    attention: cpu attention over each head's score rows\n"));
  EXPECT_THAT(text, HasSubstr("cross-attention over the encoder output"));
  EXPECT_THAT(text, HasSubstr("    cross-attention: cpu attention over each head's score rows\n"));
}

TEST(PlanLayers, TheTextReportListsTheModelsLayersInRuns) {
  const recipe::CompiledRecipe c = recipe::compile(
      std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-tiny.yaml",
      {.overrides = {"cluster.hardware=cpu", "parallel.pipeline=2"}, .world_from_layout = true});
  const std::string text = render_text(make_plan(c, find_hardware("cpu")), c);
  // One run over both stages: the layers are alike wherever they live.
  EXPECT_THAT(text, HasSubstr(fmt::format("  layers 0-{}: causal self-attention, gelu MLP, "
                                          "layernorm\n    attention: cpu flash attention; "
                                          "generation: cached attention\n",
                                          c.recipe.model.num_layers - 1)));
}

TEST(PlanLayers, JsonListsEveryLayerWithItsImplementation) {
  const recipe::CompiledRecipe c = recipe::compile(
      std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-tiny.yaml",
      {.overrides = {"cluster.hardware=cpu"}, .world_from_layout = true});
  const nlohmann::json json = to_json(make_plan(c, find_hardware("cpu")), c);
  ASSERT_EQ(int64_t(json["layers"].size()), c.recipe.model.num_layers);
  EXPECT_EQ(json["layers"][0]["self_attention"]["mask"], "causal");
  EXPECT_EQ(json["layers"][0]["self_attention"]["implementation"],
            "cpu flash attention; generation: cached attention");
  EXPECT_EQ(json["layers"][0]["mlp"]["kind"], "dense");
  EXPECT_EQ(json["gradient_bucket_elements"].get<int64_t>(), place(c).bucket_elements);
}

}  // namespace layers_test
}  // namespace megatron::plan
