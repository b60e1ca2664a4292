// Parameter counts: exact totals for published models and per-rank shards under TP x PP.
#include <gtest/gtest.h>

#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace parameters_test {

using testing::GptShape;
using testing::make_gpt;
using testing::rederive;

// GPT-3 175B (Brown et al. 2020): 96 layers, hidden 12288, 96 heads, 2048 tokens, vocab
// padded to 51200, learned positions, LayerNorm, GeLU, biases, tied embeddings.
recipe::CompiledRecipe gpt3_175b(int64_t tensor, int64_t pipeline) {
  return make_gpt({.layers = 96,
                   .hidden = 12288,
                   .heads = 96,
                   .seq_length = 2048,
                   .tensor = tensor,
                   .pipeline = pipeline});
}

Plan plan_of(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm"));
}

TEST(Parameters, Gpt3_175bHasExactly174615846912) {
  // 96 x (12h^2 + 13h) + V h + s h + 2h with h = 12288, V = 51200, s = 2048.
  EXPECT_EQ(plan_of(gpt3_175b(1, 1)).parameters.total, 174'615'846'912);
}

TEST(Parameters, Gpt3_175bLayerAndEmbeddingCounts) {
  const Plan plan = plan_of(gpt3_175b(1, 1));
  EXPECT_EQ(plan.parameters.per_layer, 1'812'099'072);  // 12 x 12288^2 + 13 x 12288
  EXPECT_EQ(plan.parameters.embedding, 654'311'424);    // (51200 + 2048) x 12288
  EXPECT_EQ(plan.parameters.output_layer, 0);           // tied to the word embedding
}

TEST(Parameters, TotalDoesNotDependOnTheLayout) {
  EXPECT_EQ(plan_of(gpt3_175b(8, 16)).parameters.total, 174'615'846'912);
}

// One 175B layer on one of 8 tensor-parallel ranks (h = 12288):
//   2 LayerNorms, replicated          4h            =      49,152
//   QKV (column): 3h^2/8 + 3h/8                     =  56,627,712
//   proj (row):   h^2/8 + h (bias replicated)       =  18,886,656
//   fc1 (column): 4h^2/8 + 4h/8                     =  75,503,616
//   fc2 (row):    4h^2/8 + h                        =  75,509,760
//                                                   = 226,576,896
constexpr int64_t kLayerPerRank = 226'576'896;

TEST(Parameters, MiddleStageOf175bAtTp8Pp16HoldsSixLayerShards) {
  const Plan plan = plan_of(gpt3_175b(8, 16));
  EXPECT_EQ(plan.stages[7].parameters_per_rank, 6 * kLayerPerRank);  // 1,359,461,376
}

TEST(Parameters, FirstStageOf175bAtTp8Pp16AddsVocabShardAndPositions) {
  const Plan plan = plan_of(gpt3_175b(8, 16));
  // + word embedding 51200 x 12288 / 8 = 78,643,200 + positions 2048 x 12288 = 25,165,824.
  EXPECT_EQ(plan.stages[0].parameters_per_rank, 6 * kLayerPerRank + 78'643'200 + 25'165'824);
  EXPECT_EQ(plan.stages[0].parameters_per_rank, 1'463'270'400);
}

TEST(Parameters, LastStageOf175bAtTp8Pp16AddsFinalNormAndEmbeddingCopy) {
  const Plan plan = plan_of(gpt3_175b(8, 16));
  // + final LayerNorm 2 x 12288 = 24,576 + the tied word embedding's copy, 78,643,200.
  EXPECT_EQ(plan.stages[15].parameters_per_rank, 6 * kLayerPerRank + 24'576 + 78'643'200);
}

TEST(Parameters, PerRankMaxAndMinAreOverStages) {
  const Plan plan = plan_of(gpt3_175b(8, 16));
  EXPECT_EQ(plan.parameters.per_rank_max, 1'463'270'400);      // stage 0
  EXPECT_EQ(plan.parameters.per_rank_min, 6 * kLayerPerRank);  // any middle stage
}

TEST(Parameters, SingleRankHoldsTheWholeModel) {
  const Plan plan = plan_of(gpt3_175b(1, 1));
  EXPECT_EQ(plan.parameters.per_rank_max, plan.parameters.total);
  EXPECT_EQ(plan.parameters.per_rank_min, plan.parameters.total);
}

// Llama-2 7B (Touvron et al. 2023): RMSNorm, SwiGLU with F = 11008, no biases, rotary
// positions, untied output layer, vocab 32000. Meta's published count: 6,738,415,616.
TEST(Parameters, Llama2_7bShapeHasMetasPublishedCount) {
  auto compiled =
      make_gpt({.layers = 32, .hidden = 4096, .heads = 32, .seq_length = 4096, .vocab = 32000});
  auto& model = compiled.recipe.model;
  model.normalization = recipe::Norm::RmsNorm;
  model.activation = recipe::Activation::Swiglu;
  model.ffn_hidden_size = 11008;
  model.add_bias_linear = false;
  model.position_embedding = recipe::PositionEmbedding::Rotary;
  model.tie_embeddings = false;
  rederive(compiled);
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.parameters.total, 6'738'415'616);
  EXPECT_EQ(plan.parameters.output_layer, 32000 * 4096);
}

// Llama-3 8B: as Llama-2 but 8 key/value groups (GQA), F = 14336, vocab 128256: 8,030,261,248.
TEST(Parameters, GroupedQueryAttentionCountsKeyValueHeadsOnly) {
  auto compiled =
      make_gpt({.layers = 32, .hidden = 4096, .heads = 32, .seq_length = 8192, .vocab = 128256});
  auto& model = compiled.recipe.model;
  model.normalization = recipe::Norm::RmsNorm;
  model.activation = recipe::Activation::Swiglu;
  model.ffn_hidden_size = 14336;
  model.num_query_groups = 8;
  model.add_bias_linear = false;
  model.position_embedding = recipe::PositionEmbedding::Rotary;
  model.tie_embeddings = false;
  rederive(compiled);
  EXPECT_EQ(plan_of(compiled).parameters.total, 8'030'261'248);
}

// Megatron's BERT-large: 24 layers, hidden 1024, 16 heads, 512 tokens, vocab 30592 (30522
// padded). Layers 24 x (12h^2 + 13h) = 302,309,376; embeddings V h + 512 h + 2 h (token
// types) = 31,852,544; final norm 2h; LM head dense h^2 + h, norm 2h, bias V = 1,082,240;
// pooler h^2 + h = 1,049,600; binary head 2h + 2 = 2,050. Total 336,297,858.
TEST(Parameters, BertLargeAddsTokenTypesLmHeadPoolerAndBinaryHead) {
  auto compiled =
      make_gpt({.layers = 24, .hidden = 1024, .heads = 16, .seq_length = 512, .vocab = 30592});
  compiled.recipe.model.arch = recipe::Arch::Bert;
  rederive(compiled);
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.parameters.total, 336'297'858);
  EXPECT_EQ(plan.parameters.embedding, 31'852'544);
}

TEST(Parameters, BertWithoutBinaryHeadHasNoTokenTypesPoolerOrClassifier) {
  auto compiled =
      make_gpt({.layers = 24, .hidden = 1024, .heads = 16, .seq_length = 512, .vocab = 30592});
  compiled.recipe.model.arch = recipe::Arch::Bert;
  compiled.recipe.model.bert_binary_head = false;
  rederive(compiled);
  // 336,297,858 - token types 2,048 - pooler 1,049,600 - classifier 2,050.
  EXPECT_EQ(plan_of(compiled).parameters.total, 335'244'160);
}

// T5-base shape: 12 + 12 layers, hidden 768, 12 heads, F 3072, vocab 32128, 512 positions.
// Encoder layer 12h^2 + 13h = 7,087,872; a decoder layer adds cross-attention (norm 2h,
// query h^2 + h, key/value 2h^2 + 2h, proj h^2 + h) = 4h^2 + 6h: 9,451,776. One shared
// embedding (V + 512) h = 25,067,520; two final norms 4h; LM head bias V.
TEST(Parameters, T5DecoderLayersAddCrossAttentionAndShareOneEmbedding) {
  auto compiled =
      make_gpt({.layers = 12, .hidden = 768, .heads = 12, .seq_length = 512, .vocab = 32128});
  compiled.recipe.model.arch = recipe::Arch::T5;
  compiled.recipe.data.decoder_seq_length = 128;
  rederive(compiled);
  const Plan plan = plan_of(compiled);
  EXPECT_EQ(plan.parameters.per_layer, 7'087'872);
  EXPECT_EQ(plan.parameters.per_decoder_layer, 9'451'776);
  EXPECT_EQ(plan.parameters.total,
            12 * 7'087'872 + 12 * 9'451'776 + 25'067'520 + 4 * 768 + 32128);  // 223,578,496
}

}  // namespace parameters_test
}  // namespace megatron::plan
