// FLOPs per iteration in Megatron's convention (Narayanan et al. 2021, "Efficient Large-Scale
// Language Model Training on GPU Clusters", eq. 3): expected values in closed form.
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace flops_test {

using testing::gpt3_175b;
using testing::make_gpt;
using testing::rederive;

Plan plan_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm"));
}


constexpr double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;

TEST(Flops, ModelFlopsAre72BsLh2Times1PlusS6hPlusV12hL) {
  const double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(plan_of(gpt3_175b()).flops.model_per_iteration, expected, expected * 1e-12);
}

TEST(Flops, HardwareFlopsEqualModelFlopsWithoutRecompute) {
  const Plan plan = plan_of(gpt3_175b());
  EXPECT_DOUBLE_EQ(plan.flops.hardware_per_iteration, plan.flops.model_per_iteration);
}

TEST(Flops, FullRecomputeAddsOneForwardOfEveryLayer) {
  auto compiled = gpt3_175b();
  compiled.recipe.training.recompute = recipe::Recompute::Full;
  rederive(compiled);
  // Layers: 72 BsLh^2 (1 + s/6h), times 4/3; logits 6 BshV are not recomputed.
  const double layers = 72 * B * s * L * h * h * (1 + s / (6 * h));
  const double expected = layers * 4 / 3 + 6 * B * s * h * V;
  EXPECT_NEAR(plan_of(compiled).flops.hardware_per_iteration, expected, expected * 1e-12);
}

TEST(Flops, SelectiveRecomputeAddsTheAttentionCoreForward) {
  auto compiled = gpt3_175b();
  compiled.recipe.training.recompute = recipe::Recompute::Selective;
  const Plan plan = plan_of(compiled);
  // QK^T and the weighted sum of V: 4 B s^2 h per layer.
  const double expected = plan.flops.model_per_iteration + 4 * B * s * s * h * L;
  EXPECT_NEAR(plan.flops.hardware_per_iteration, expected, expected * 1e-12);
}

TEST(Flops, ModelFlopsDoNotDependOnTheLayout) {
  const double spread = plan_of(gpt3_175b()).flops.model_per_iteration;
  const double single = plan_of(make_gpt({.layers = 96,
                                          .hidden = 12288,
                                          .heads = 96,
                                          .seq_length = 2048,
                                          .global_batch = 1536}))
                            .flops.model_per_iteration;
  EXPECT_NEAR(spread, single, single * 1e-12);
}

TEST(Flops, TokensPerIterationAreGlobalBatchTimesSequence) {
  EXPECT_EQ(plan_of(gpt3_175b()).tokens_per_iteration, 1536 * 2048);
}

// A Llama-like layer: 8 key/value groups of d = 128 and SwiGLU (three h x F matrices).
TEST(Flops, GroupedQueryAttentionAndSwigluCountTheirOwnMatrices) {
  auto compiled = make_gpt({.layers = 32,
                            .hidden = 4096,
                            .heads = 32,
                            .seq_length = 4096,
                            .vocab = 128256,
                            .global_batch = 8});
  compiled.recipe.model.num_query_groups = 8;
  compiled.recipe.model.activation = recipe::Activation::Swiglu;
  compiled.recipe.model.ffn_hidden_size = 14336;
  rederive(compiled);
  const double B = 8, s = 4096, h = 4096, F = 14336, L = 32, V = 128256, kv = 8 * 128;
  const double layer = 2 * B * s * h * (h + 2 * kv)  // QKV
                       + 2 * B * s * h * h           // output projection
                       + 2 * B * s * h * F * 2       // fc1 with its gate
                       + 2 * B * s * F * h           // fc2
                       + 4 * B * s * s * h;          // scores and weighted values
  const double expected = 3 * (L * layer + 2 * B * s * h * V);
  EXPECT_NEAR(plan_of(compiled).flops.model_per_iteration, expected, expected * 1e-12);
}

// T5: encoder layers run on s, decoder layers on the decoder length sd and attend to the
// encoder output (queries from sd tokens, keys and values from s); logits on sd.
TEST(Flops, T5DecoderLayersAddCrossAttention) {
  auto compiled = make_gpt({.layers = 12,
                            .hidden = 768,
                            .heads = 12,
                            .seq_length = 512,
                            .vocab = 32128,
                            .global_batch = 128});
  compiled.recipe.model.arch = recipe::Arch::T5;
  compiled.recipe.data.decoder_seq_length = 128;
  rederive(compiled);
  const double B = 128, s = 512, sd = 128, h = 768, V = 32128;
  const double encoder = 24 * B * s * h * h + 4 * B * s * s * h;
  const double cross =
      2 * B * sd * h * h + 4 * B * s * h * h + 2 * B * sd * h * h + 4 * B * sd * s * h;
  const double decoder = 24 * B * sd * h * h + 4 * B * sd * sd * h + cross;
  const double expected = 3 * (12 * encoder + 12 * decoder + 2 * B * sd * h * V);
  EXPECT_NEAR(plan_of(compiled).flops.model_per_iteration, expected, expected * 1e-12);
}

TEST(Flops, BertAddsTheLmHeadDense) {
  auto gpt = make_gpt({.layers = 24,
                       .hidden = 1024,
                       .heads = 16,
                       .seq_length = 512,
                       .vocab = 30592,
                       .global_batch = 256});
  auto bert = gpt;
  bert.recipe.model.arch = recipe::Arch::Bert;
  rederive(bert);
  const double B = 256, s = 512, h = 1024;
  EXPECT_NEAR(plan_of(bert).flops.model_per_iteration - plan_of(gpt).flops.model_per_iteration,
              3 * 2 * B * s * h * h, 1.0);
}

}  // namespace flops_test
}  // namespace megatron::plan
