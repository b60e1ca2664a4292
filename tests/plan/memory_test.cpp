// Memory per rank: Megatron's bytes per parameter and Korthikanti et al. 2022's activation
// formulas ("Reducing Activation Recomputation in Large Transformer Models", Table 2), with
// the expected values written out in closed form here, independently of the planner.
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace memory_test {

using testing::GptShape;
using testing::gpt3_175b;
using testing::make_gpt;
using testing::rederive;

Plan plan_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm"));
}

// ---- Bytes per parameter ---------------------------------------------------------------


double state_bytes(const Stage& stage) {
  return stage.memory.weights + stage.memory.gradients + stage.memory.optimizer;
}

TEST(Memory, MixedPrecisionAdamKeeps18BytesPerParameter) {
  // bf16 weights 2 + f32 main gradients 4 + f32 master weights 4 + Adam moments 8.
  const Plan plan = plan_of(gpt3_175b(8, 16, 8, recipe::DType::Bf16));
  const Stage& s = plan.stages[7];
  EXPECT_DOUBLE_EQ(s.memory.weights, 2.0 * s.parameters_per_rank);
  EXPECT_DOUBLE_EQ(s.memory.gradients, 4.0 * s.parameters_per_rank);
  EXPECT_DOUBLE_EQ(s.memory.optimizer, 12.0 * s.parameters_per_rank);
}

TEST(Memory, Fp32AdamKeeps16BytesPerParameter) {
  const Plan plan = plan_of(gpt3_175b(8, 16, 8, recipe::DType::F32));
  const Stage& s = plan.stages[7];
  EXPECT_DOUBLE_EQ(state_bytes(s), 16.0 * s.parameters_per_rank);
}

TEST(Memory, DistributedOptimizerKeeps6Plus12OverDBytesPerParameterInMixedPrecision) {
  auto compiled = gpt3_175b(8, 16, 8, recipe::DType::Bf16);
  compiled.recipe.parallel.distributed_optimizer = true;
  const Plan plan = plan_of(compiled);
  const Stage& s = plan.stages[7];
  EXPECT_DOUBLE_EQ(state_bytes(s), (6.0 + 12.0 / 8) * s.parameters_per_rank);
}

TEST(Memory, DistributedOptimizerKeeps8Plus8OverDBytesPerParameterInFp32) {
  auto compiled = gpt3_175b(8, 16, 8, recipe::DType::F32);
  compiled.recipe.parallel.distributed_optimizer = true;
  const Plan plan = plan_of(compiled);
  const Stage& s = plan.stages[7];
  EXPECT_DOUBLE_EQ(state_bytes(s), (8.0 + 8.0 / 8) * s.parameters_per_rank);
}

TEST(Memory, SgdKeepsOneMomentWhenMomentumIsOn) {
  auto compiled = gpt3_175b(8, 16, 8, recipe::DType::F32);
  compiled.recipe.training.optimizer = recipe::Optimizer::Sgd;
  compiled.recipe.training.sgd_momentum = 0.9;
  const Plan plan = plan_of(compiled);
  const Stage& s = plan.stages[7];
  EXPECT_DOUBLE_EQ(s.memory.optimizer, 4.0 * s.parameters_per_rank);
}

TEST(Memory, SgdWithoutMomentumKeepsNoOptimizerStateInFp32) {
  auto compiled = gpt3_175b(8, 16, 8, recipe::DType::F32);
  compiled.recipe.training.optimizer = recipe::Optimizer::Sgd;
  compiled.recipe.training.sgd_momentum = 0;
  EXPECT_DOUBLE_EQ(plan_of(compiled).stages[7].memory.optimizer, 0.0);
}

TEST(Memory, TiedEmbeddingCopyOnTheLastStageHasOptimizerStateToo) {
  const Plan plan = plan_of(gpt3_175b(8, 16, 8, recipe::DType::Bf16));
  const Stage& last = plan.stages[15];
  EXPECT_DOUBLE_EQ(state_bytes(last), 18.0 * last.parameters_per_rank);
}

// ---- Activations: GPT-3 175B, s = 2048, b = 1, h = 12288, a = 96, t = 8 (paper Table 2) ----
// A middle stage (1..14) holds 6 layers and nothing else, so its per-micro-batch activations
// are exactly 6 x the per-layer formula.

constexpr double s = 2048, b = 1, h = 12288, a = 96, t = 8;
constexpr double sbh = s * b * h;  // 25,165,824

recipe::CompiledRecipe gpt3_175b_tp8_pp16() {
  return make_gpt({.layers = 96,
                   .hidden = 12288,
                   .heads = 96,
                   .seq_length = 2048,
                   .global_batch = 64,
                   .tensor = 8,
                   .pipeline = 16});
}

double middle_stage_activations_per_microbatch(const recipe::CompiledRecipe& compiled) {
  return plan_of(compiled).stages[1].activation_bytes_per_microbatch;
}

TEST(Activations, NoRecomputeNoSequenceParallelMatchesKorthikanti) {
  // sbh (10 + 24/t + 5as/(ht)) = sbh (10 + 3 + 10) = 23 sbh per layer.
  const double per_layer = sbh * (10 + 24 / t + 5 * a * s / (h * t));
  EXPECT_DOUBLE_EQ(per_layer, 23 * sbh);
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(gpt3_175b_tp8_pp16()), 6 * per_layer);
}

TEST(Activations, SequenceParallelMatchesKorthikanti) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.parallel.sequence_parallel = true;
  // sbh (34 + 5as/h) / t = sbh (34 + 80) / 8 = 14.25 sbh per layer.
  const double per_layer = sbh * (34 + 5 * a * s / h) / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

TEST(Activations, SelectiveRecomputeDropsTheAttentionCoreTerm) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Selective;
  // sbh (10 + 24/t) = 13 sbh per layer.
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * sbh * (10 + 24 / t));
}

TEST(Activations, SelectiveRecomputeWithSequenceParallelKeeps34SbhOverT) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Selective;
  compiled.recipe.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * 34 * sbh / t);
}

TEST(Activations, FullRecomputeKeepsOnlyEachLayersInput) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Full;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * 2 * sbh);
}

TEST(Activations, FullRecomputeWithSequenceParallelKeepsAShardOfEachInput) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Full;
  compiled.recipe.parallel.sequence_parallel = true;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * 2 * sbh / t);
}

TEST(Activations, FullRecomputeOfSomeLayersKeepsTheOthersWhole) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Full;
  compiled.recipe.training.recompute_num_layers = 2;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 2 * 2 * sbh + 4 * 23 * sbh);
}

TEST(Activations, FlashAttentionKeepsSoftmaxStatisticsInsteadOfScores) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.model.flash_attention = true;
  // 13 sbh as with selective recompute, plus f32 logsumexp per query and head: 4 a s b / t.
  const double per_layer = sbh * (10 + 24 / t) + 4 * a * s * b / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

TEST(Activations, QkNormsKeepTheProjectionsOutputAndTheirStatisticsToo) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.recompute = recipe::Recompute::Selective;
  compiled.recipe.model.normalization = recipe::Norm::RmsNorm;
  compiled.recipe.model.qk_layernorm = true;
  // 13 sbh, plus the un-normed q, k and v (2 bytes x 3 sbh / t) and f32 statistics per query
  // and key head (4 x 2a sb / t: 96 key heads, one per query head here).
  const double per_layer = sbh * (10 + 24 / t) + 6 * sbh / t + 4 * 2 * a * s * b / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

TEST(Activations, DropoutMasksVanishWithoutDropout) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.model.hidden_dropout = 0;
  compiled.recipe.model.attention_dropout = 0;
  // Minus two 1-byte hidden masks (2 sbh), the 1-byte attention mask and the separate
  // dropout output (as^2b + 2as^2b over t): the softmax output feeds the value product.
  const double per_layer = sbh * (8 + 24 / t) + 2 * a * s * s * b / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

TEST(Activations, ContextParallelHalvesEverythingAtTwoRanks) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.parallel.context = 2;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * 23 * sbh / 2);
}

TEST(Activations, GroupedQueryAttentionStoresKeysAndValuesAtGroupWidth) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.model.num_query_groups = 8;  // 12 heads share each key/value head
  rederive(compiled);
  // Of the 24 sbh/t split terms, K (2 sbh) and V (2 sbh) shrink to g d / h = 1/12 of that.
  const double per_layer = sbh * (10 + (24 - 4 + 4.0 / 12) / t) + 5 * a * s * s * b / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

TEST(Activations, SwigluKeepsBothHalvesOfFc1AndTheProduct) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.model.activation = recipe::Activation::Swiglu;
  compiled.recipe.model.ffn_hidden_size = 32768;  // F = 8h/3
  rederive(compiled);
  // The MLP's 16 sbh/t (GeLU input 8 + fc2 input 8) become 2 (2F + F) s b / t.
  const double F = 32768;
  const double per_layer = sbh * (10 + 8 / t) + 2 * 3 * F * s * b / t + 5 * a * s * s * b / t;
  EXPECT_DOUBLE_EQ(middle_stage_activations_per_microbatch(compiled), 6 * per_layer);
}

// ---- Micro-batches in flight and whole stages ----------------------------------------

TEST(Activations, OneFOneBStageRHoldsPMinusRMicroBatches) {
  const Plan plan = plan_of(gpt3_175b_tp8_pp16());  // m = 64
  EXPECT_DOUBLE_EQ(plan.stages[0].microbatches_in_flight, 16);
  EXPECT_DOUBLE_EQ(plan.stages[5].microbatches_in_flight, 11);
  EXPECT_DOUBLE_EQ(plan.stages[15].microbatches_in_flight, 1);
  EXPECT_DOUBLE_EQ(plan.stages[1].memory.activations, 15 * 6 * 23 * sbh);
}

TEST(Activations, OneFOneBNeverHoldsMoreThanTheMicroBatchesThereAre) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.global_batch_size = 4;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(plan_of(compiled).stages[0].microbatches_in_flight, 4);
}

TEST(Activations, AllForwardAllBackwardHoldsEveryMicroBatch) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.parallel.schedule = recipe::Schedule::AllForwardAllBackward;
  rederive(compiled);
  EXPECT_DOUBLE_EQ(plan_of(compiled).stages[15].microbatches_in_flight, 64);
}

TEST(Activations, InterleavedFirstStageHoldsLTimes1PlusPMinus1OverPvLayersWorth) {
  // L = 32 layers, p = 4, v = 2: 4 layers per chunk, 8 per stage, m = 16.
  auto compiled = make_gpt({.layers = 32,
                            .hidden = 4096,
                            .heads = 32,
                            .seq_length = 2048,
                            .global_batch = 16,
                            .tensor = 8,
                            .pipeline = 4,
                            .virtual_pipeline = 2});
  const double L = 32, p = 4, v = 2, s = 2048, h = 4096, a = 32, t = 8;
  const double per_layer = s * h * (10 + 24 / t + 5 * a * s / (h * t));
  const double layers_worth = L * (1 + (p - 1) / (p * v));  // 44
  // Stage 0 also keeps the embedding's 1-byte dropout mask for each micro-batch in flight,
  // p + (p - 1)/v of them.
  const double expected = per_layer * layers_worth + s * h * (p + (p - 1) / v);
  const Plan plan = plan_of(compiled);
  EXPECT_DOUBLE_EQ(plan.stages[0].microbatches_in_flight, p + (p - 1) / v);  // 5.5
  EXPECT_DOUBLE_EQ(plan.stages[0].memory.activations, expected);
}

// ---- Whole stages with their extras ---------------------------------------------------

// Korthikanti's 530B: L = 105, h = 20480, a = 128, t = 8, p = 35, s = 2048, b = 1. With
// sequence parallelism and selective recompute the first stage keeps 34 sbhL/t no matter p
// (p micro-batches of L/p layers), plus the embedding's dropout mask for each of them.
TEST(Activations, Korthikanti530bFirstStageKeeps34SbhLOverT) {
  auto compiled = make_gpt({.layers = 105,
                            .hidden = 20480,
                            .heads = 128,
                            .seq_length = 2048,
                            .global_batch = 280,
                            .tensor = 8,
                            .pipeline = 35});
  compiled.recipe.parallel.sequence_parallel = true;
  compiled.recipe.training.recompute = recipe::Recompute::Selective;
  const double s = 2048, h = 20480, L = 105, t = 8, p = 35;
  const double expected = 34 * s * h * L / t + s * h / t * p;
  EXPECT_DOUBLE_EQ(plan_of(compiled).stages[0].memory.activations, expected);
}

// A 1.3B model (L = 24, h = 2048, a = 16, V = 51200) in f32 on one rank, s = 2048, b = 1.
// f32 doubles every stored tensor except the 1-byte masks: per layer 66 sbh + 9 a s^2 b.
// The rank also keeps the embedding mask (sbh), the final norm input (4 sbh), the output layer's
// input (4 sbh) and, without the fused classifier, f32 logits (4 s b V); 1F1B on one stage keeps
// one micro-batch.
recipe::CompiledRecipe gpt_1_3b_f32(bool fused_classifier) {
  auto compiled = make_gpt({.layers = 24,
                            .hidden = 2048,
                            .heads = 16,
                            .seq_length = 2048,
                            .global_batch = 8,
                            .dtype = recipe::DType::F32});
  compiled.recipe.training.fused_classifier = fused_classifier;
  return compiled;
}

TEST(Activations, Fp32SingleRankWithoutTheFusedClassifierKeepsFourByteTensorsPlusLogits) {
  const double s = 2048, b = 1, h = 2048, a = 16, L = 24, V = 51200;
  const double sbh = s * b * h;
  const double expected = L * (66 * sbh + 9 * a * s * s * b) + 9 * sbh + 4 * s * b * V;
  const Plan plan = plan_of(gpt_1_3b_f32(false));
  EXPECT_DOUBLE_EQ(plan.stages[0].microbatches_in_flight, 1);
  EXPECT_DOUBLE_EQ(plan.stages[0].memory.activations, expected);
}

// Fused, the head keeps the gradient of the output layer's input (4 sbh in f32) in place of
// that input, no logits, and holds one 32 MiB chunk of them while the forward runs: 368 MiB
// below the unfused estimate, the 400 MiB of logits less the chunk.
TEST(Activations, FusedClassifierKeepsTheHeadsInputGradientAndOneChunkOfLogits) {
  const double s = 2048, b = 1, h = 2048, a = 16, L = 24, V = 51200;
  // 32 MiB holds 163 rows of 51,200 f32 logits, fewer than the 512 a chunk has at least: the
  // 2,048 rows run in four chunks of 512.
  const double sbh = s * b * h, chunk = 4.0 * 512 * V;
  const double expected = L * (66 * sbh + 9 * a * s * s * b) + 9 * sbh + chunk;
  const Plan fused = plan_of(gpt_1_3b_f32(true)), unfused = plan_of(gpt_1_3b_f32(false));
  EXPECT_DOUBLE_EQ(fused.stages[0].memory.activations, expected);
  EXPECT_DOUBLE_EQ(fused.stages[0].activation_bytes_transient, chunk);  // reported apart
  EXPECT_DOUBLE_EQ(unfused.stages[0].activation_bytes_transient, 0);
  EXPECT_DOUBLE_EQ(unfused.stages[0].memory.activations - fused.stages[0].memory.activations,
                   4 * s * b * V - chunk);
  EXPECT_LT(fused.peak_rank.total(), unfused.peak_rank.total());
}

// A chunk is at most the whole logits: a small micro-batch's fit in one.
TEST(Activations, FusedClassifiersChunkIsAtMostTheWholeLogits) {
  auto compiled = gpt_1_3b_f32(true);
  compiled.recipe.data.seq_length = 64;
  rederive(compiled);
  const double s = 64, b = 1, V = 51200;
  ASSERT_LT(4 * s * b * V, 32.0 * 1024 * 1024);
  const Plan fused = plan_of(compiled);
  compiled.recipe.training.fused_classifier = false;
  const Plan unfused = plan_of(compiled);
  // One chunk of all the logits, alive during the forward of the one micro-batch in flight.
  EXPECT_DOUBLE_EQ(fused.stages[0].memory.activations, unfused.stages[0].memory.activations);
}

TEST(Memory, Fp32SingleRank1_3bModelStateIs16BytesPerParameter) {
  auto compiled = make_gpt({.layers = 24,
                            .hidden = 2048,
                            .heads = 16,
                            .seq_length = 2048,
                            .global_batch = 8,
                            .dtype = recipe::DType::F32});
  // 12 L h^2 + 13 L h + V h + s h + 2h = 1,317,654,528 parameters.
  const double params =
      12.0 * 24 * 2048 * 2048 + 13.0 * 24 * 2048 + 51200.0 * 2048 + 2048.0 * 2048 + 2 * 2048;
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.parameters.total, 1'317'654'528);
  EXPECT_DOUBLE_EQ(plan.peak_rank.weights + plan.peak_rank.gradients + plan.peak_rank.optimizer,
                   16 * params);
}

TEST(Memory, LastStageWithoutTheFusedClassifierKeepsFinalNormInputAndF32LogitsShard) {
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.fused_classifier = false;
  const Plan plan = plan_of(compiled);
  // One micro-batch in flight: 6 layers + final norm input 2 sbh + the output layer's input
  // 2 sbh + logits 4 s b V / t.
  const double expected = 6 * 23 * sbh + 4 * sbh + 4 * s * b * 51200 / t;
  EXPECT_DOUBLE_EQ(plan.stages[15].memory.activations, expected);
}

// The fused classifier's last stage holds one chunk of the 50 MiB logits shard instead of all of
// them (and the gradient of the output layer's input in place of that input): 32 MiB holds 1,310
// of the 2,048 rows of 6,400 columns, so they run as two even chunks of 1,024 rows.
TEST(Memory, FusedClassifiersLastStageIsBelowTheUnfusedByTheLogitsLessAChunk) {
  const double logits = 4 * s * b * 51200 / t, chunk = 4.0 * 1024 * 51200 / t;
  const Plan fused = plan_of(gpt3_175b_tp8_pp16());
  auto compiled = gpt3_175b_tp8_pp16();
  compiled.recipe.training.fused_classifier = false;
  const Plan unfused = plan_of(compiled);
  EXPECT_DOUBLE_EQ(fused.stages[15].memory.activations,
                   unfused.stages[15].memory.activations - logits + chunk);
  // Stages without the output layer are unchanged.
  EXPECT_DOUBLE_EQ(fused.stages[14].memory.activations, unfused.stages[14].memory.activations);
}

TEST(Memory, PeakStageIsTheOneWithTheLargestTotal) {
  const Plan plan = plan_of(gpt3_175b_tp8_pp16());
  EXPECT_EQ(plan.peak_stage, 0);  // the most parameters and p micro-batches in flight
  for (const Stage& stage : plan.stages) EXPECT_LE(stage.memory.total(), plan.peak_rank.total());
  EXPECT_DOUBLE_EQ(plan.peak_rank.total(), plan.stages[0].memory.total());
}

}  // namespace memory_test
}  // namespace megatron::plan
