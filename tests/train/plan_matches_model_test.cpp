// The Plan's parameter counts are the engine's: the model built for each stage of a layout
// holds exactly the parameters the planner counts for it, for every family it trains.
#include <gtest/gtest.h>

#include "model/language_model.hpp"
#include "plan/plan.hpp"
#include "plan/hardware.hpp"
#include "plan/model_config.hpp"
#include "tensor/cpu_backend.hpp"

namespace megatron::train {
namespace {

recipe::CompiledRecipe compiled(const std::string& file, std::vector<std::string> overrides) {
  return recipe::compile(std::string(MEGATRON_SOURCE_DIR) + "/" + file,
                         {.overrides = std::move(overrides), .world_from_layout = true});
}

// The whole model's parameters, every stage and tensor-parallel shard built on one backend.
int64_t engine_parameters(const recipe::CompiledRecipe& c, const plan::Plan& plan) {
  tensor::CpuBackend b(1);
  const model::ModelConfig config = plan::model_config(c.recipe, c.derived);
  int64_t total = 0;
  const int64_t tp = c.recipe.parallel.tensor, pp = int64_t(plan.stages.size());
  for (int64_t stage = 0; stage < pp; ++stage) {
    for (int64_t rank = 0; rank < tp; ++rank) {
      const model::LanguageModel m(
          b, config,
          {.tp = {.group = nullptr, .rank = rank, .size = tp},
           .chunks = plan.stages[size_t(stage)].chunks,
           .first_stage = stage == 0,
           .last_stage = stage == pp - 1});
      int64_t held = 0, once = 0;
      for (const auto& p : m.parameters().all()) {
        held += p->value.numel();
        if (model::counts_once(*p, rank)) once += p->value.numel();
      }
      EXPECT_EQ(held, plan.stages[size_t(stage)].parameters_per_rank)
          << "stage " << stage << ", tensor-parallel rank " << rank;
      total += once;
    }
  }
  return total;
}

void expect_plan_counts_the_engines_parameters(const std::string& file,
                                               const std::vector<std::string>& overrides) {
  const recipe::CompiledRecipe c = compiled(file, overrides);
  const plan::Plan plan = plan::make_plan(c, plan::find_hardware(c.recipe.cluster.hardware));
  EXPECT_EQ(engine_parameters(c, plan), plan.parameters.total);
}

const std::vector<std::string> kSmall{"model.num_layers=4", "model.hidden_size=64",
                                      "model.num_attention_heads=4", "data.seq_length=64"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
const std::vector<std::string> kSharded{"parallel.tensor=2", "parallel.pipeline=2",
                                        "training.global_batch_size=8"};

TEST(PlanMatchesModel, BertParametersAreCountedExactly) {
  expect_plan_counts_the_engines_parameters("recipes/bert-base.yaml", kSmall);
}

TEST(PlanMatchesModel, BertStagesAndShardsAreCountedExactlyUnderTensorAndPipeline) {
  expect_plan_counts_the_engines_parameters("recipes/bert-base.yaml", with(kSmall, kSharded));
}

TEST(PlanMatchesModel, BertWithoutBinaryHeadParametersAreCountedExactly) {
  auto o = kSmall;
  o.push_back("model.bert_binary_head=false");
  expect_plan_counts_the_engines_parameters("recipes/bert-base.yaml", o);
}

TEST(PlanMatchesModel, GptParametersAreCountedExactly) {
  expect_plan_counts_the_engines_parameters("recipes/gpt-tiny.yaml", {});
}

TEST(PlanMatchesModel, LlamaShapedParametersAreCountedExactlyUnderTensorAndPipeline) {
  expect_plan_counts_the_engines_parameters(
      "recipes/gpt-tiny.yaml",
      with(kSharded, {"model.position_embedding=rope", "model.normalization=rmsnorm",
                      "model.activation=swiglu", "model.num_query_groups=2",
                      "model.add_bias_linear=false", "model.tie_embeddings=false"}));
}

TEST(PlanMatchesModel, QkNormsAreCountedExactlyUnderTensorAndPipeline) {
  expect_plan_counts_the_engines_parameters(
      "recipes/gpt-tiny.yaml",
      with(kSharded, {"model.position_embedding=rope", "model.normalization=rmsnorm",
                      "model.activation=swiglu", "model.qk_layernorm=true",
                      "model.add_bias_linear=false"}));
}

TEST(PlanMatchesModel, T5ParametersAreCountedExactly) {
  expect_plan_counts_the_engines_parameters("recipes/t5-base.yaml",
                                            with(kSmall, {"model.decoder_num_layers=3"}));
}

TEST(PlanMatchesModel, T5StagesAreCountedExactlyUnderTensorAndPipelineParallelism) {
  expect_plan_counts_the_engines_parameters(
      "recipes/t5-base.yaml", with(kSmall, {"model.decoder_num_layers=2", "parallel.tensor=2",
                                            "parallel.pipeline=3", "training.global_batch_size=32"}));
}

TEST(PlanMatchesModel, T5ShardsAreCountedExactlyUnderTensorParallelism) {
  expect_plan_counts_the_engines_parameters(
      "recipes/t5-base.yaml", with(kSmall, {"parallel.tensor=2", "training.global_batch_size=32"}));
}

TEST(PlanMatchesModel, T5RelativePositionTablesAreCountedExactlyUnderTensorParallelism) {
  expect_plan_counts_the_engines_parameters(
      "recipes/t5-tiny.yaml", {"model.position_embedding=relative", "parallel.tensor=2"});
}

TEST(PlanMatchesModel, UntiedGegluT5WithoutBiasesIsCountedExactly) {
  expect_plan_counts_the_engines_parameters(
      "recipes/t5-tiny.yaml", {"model.tie_embeddings=false", "model.add_bias_linear=false",
                               "model.normalization=rmsnorm", "model.activation=geglu"});
}

}  // namespace
}  // namespace megatron::train
