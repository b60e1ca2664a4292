// Bytes the busiest rank sends per iteration, by kind, against hand-computed ring volumes.
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace communication_test {

using testing::gpt3_175b;
using testing::make_gpt;

Communication communication_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm")).communication;
}


constexpr double m = 192;
constexpr double N = 2.0 * 2048 * 12288;  // one bf16 (s, b, h) activation: 50,331,648 bytes

TEST(Communication, TensorParallelIsFourRingAllReducesPerLayerPerMicroBatch) {
  // 6 layers x 4 all-reduces x 2 (t-1)/t N, plus the embedding's forward all-reduce on the
  // first stage (the last stage's output-layer backward all-reduce ties with it).
  const double all_reduce = 2.0 * 7 / 8 * N;
  EXPECT_DOUBLE_EQ(communication_of(gpt3_175b()).tensor_parallel, m * (6 * 4 + 1) * all_reduce);
}

TEST(Communication, SequenceParallelMovesTheSameTensorParallelBytes) {
  auto compiled = gpt3_175b();
  compiled.recipe.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(communication_of(compiled).tensor_parallel,
                   communication_of(gpt3_175b()).tensor_parallel);
}

TEST(Communication, NoTensorParallelTrafficOnOneTensorRank) {
  EXPECT_DOUBLE_EQ(communication_of(make_gpt({.global_batch = 8, .pipeline = 2})).tensor_parallel,
                   0);
}

TEST(Communication, MiddleStageSendsOneActivationAndOneGradientPerMicroBatch) {
  EXPECT_DOUBLE_EQ(communication_of(gpt3_175b()).pipeline_parallel, m * 2 * N);
}

TEST(Communication, SequenceParallelSendsAShardAcrossStages) {
  auto compiled = gpt3_175b();
  compiled.recipe.parallel.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(communication_of(compiled).pipeline_parallel, m * 2 * N / 8);
}

TEST(Communication, InterleavedStageSendsPerChunk) {
  // 24 layers, p = 4, v = 3, m = 16, h = 2048: each stage sends 2v messages per micro-batch.
  const auto compiled = make_gpt({.global_batch = 16, .pipeline = 4, .virtual_pipeline = 3});
  const double message = 2.0 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(communication_of(compiled).pipeline_parallel, 16 * 2 * 3 * message);
}

TEST(Communication, DataParallelAllReducesF32GradientsOfTheLargestStage) {
  // Stage 0 holds 1,463,270,400 parameters per rank; ring all-reduce over 8: 2 x 7/8 x 4 bytes.
  EXPECT_DOUBLE_EQ(communication_of(gpt3_175b()).data_parallel, 2.0 * 7 / 8 * 4 * 1'463'270'400.0);
}

TEST(Communication, DistributedOptimizerReduceScattersGradientsAndGathersWeights) {
  auto compiled = gpt3_175b();
  compiled.recipe.parallel.distributed_optimizer = true;
  // 7/8 x 4 bytes of f32 gradients + 7/8 x 2 bytes of bf16 weights.
  EXPECT_DOUBLE_EQ(communication_of(compiled).data_parallel,
                   7.0 / 8 * 4 * 1'463'270'400.0 + 7.0 / 8 * 2 * 1'463'270'400.0);
}

TEST(Communication, TiedEmbeddingsSyncTheirF32GradientShard) {
  // (V / t) x h x 4 bytes, all-reduced between 2 ranks: 2 x 1/2 x that.
  EXPECT_DOUBLE_EQ(communication_of(gpt3_175b()).embedding_sync, 51200.0 / 8 * 12288 * 4);
}

TEST(Communication, NoEmbeddingSyncWithoutAPipeline) {
  EXPECT_DOUBLE_EQ(communication_of(make_gpt({.global_batch = 8, .tensor = 2})).embedding_sync, 0);
}

}  // namespace communication_test
}  // namespace megatron::plan
