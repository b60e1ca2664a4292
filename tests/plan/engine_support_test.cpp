// What each job can run, decided in one place (plan::check_engine_support): training, eval and
// generation refuse the layouts they cannot run with a line naming the key to change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.hpp"
#include "plan/engine_support.hpp"

namespace megatron::plan {
namespace engine_support_test {

using ::testing::HasSubstr;

// A GPT of two layers of 64-channel heads on the cpu, `world` ranks all tensor-parallel, from "r.yaml".
recipe::CompiledRecipe gpt(int64_t world = 1) {
  recipe::CompiledRecipe c;
  c.file = "r.yaml";
  c.recipe.cluster.hardware = "cpu";
  c.recipe.model.vocab_size = 1000;
  c.recipe.model.num_layers = 2;
  c.recipe.parallel.tensor = world;
  c.recipe.training.micro_batch_size = 1;
  c.recipe.training.global_batch_size = world;
  c.world_size = world;
  c.derived.padded_vocab_size = 1024;
  c.derived.head_dim = 64;
  return c;
}

std::string refusal(const recipe::CompiledRecipe& c, Job job) {
  try {
    check_engine_support(c, job);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(EngineSupport, EveryJobRunsAPlainTensorParallelLayout) {
  for (const Job job : {Job::Train, Job::Eval, Job::Generate}) {
    EXPECT_EQ(refusal(gpt(), job), "");
    EXPECT_EQ(refusal(gpt(2), job), "");
  }
}

TEST(EngineSupport, TrainingRefusesContextParallelismNamingTheFileAndKey) {
  recipe::CompiledRecipe c = gpt();
  c.recipe.parallel.context = 2;
  EXPECT_EQ(refusal(c, Job::Train), "r.yaml: parallel.context: context parallelism does not train "
                                    "yet; set parallel.context=1");
}

TEST(EngineSupport, TrainingRefusesT5RelativePositionsOnAPipelineOnly) {
  recipe::CompiledRecipe c = gpt();
  c.recipe.model.arch = recipe::Arch::T5;
  c.recipe.model.position_embedding = recipe::PositionEmbedding::Relative;
  EXPECT_EQ(refusal(c, Job::Train), "");
  c.recipe.parallel.pipeline = 2;
  EXPECT_THAT(refusal(c, Job::Train), HasSubstr("r.yaml: parallel.pipeline: T5's relative positions"));
}

TEST(EngineSupport, EvalRefusesContextAndSequenceParallelism) {
  for (const std::function<void(recipe::CompiledRecipe&)> change :
       {std::function<void(recipe::CompiledRecipe&)>(
            [](recipe::CompiledRecipe& c) { c.recipe.parallel.context = 2; }),
        std::function<void(recipe::CompiledRecipe&)>(
            [](recipe::CompiledRecipe& c) { c.recipe.parallel.sequence_parallel = true; })}) {
    recipe::CompiledRecipe c = gpt(2);
    change(c);
    EXPECT_THAT(refusal(c, Job::Eval),
                HasSubstr("set parallel.context=1 and parallel.sequence_parallel=false"));
  }
}

TEST(EngineSupport, EvalRefusesATensorSplitThatLeavesTheLastRankNoScoredVocabulary) {
  // 1024 padded columns over 8 ranks: the last rank's 128 start at 896, past a vocabulary of 800.
  recipe::CompiledRecipe c = gpt(8);
  c.recipe.model.vocab_size = 800;
  EXPECT_EQ(refusal(c, Job::Eval), "parallel.tensor=8: the last tensor-parallel rank would hold "
                                   "none of the 800 scored vocabulary columns; use fewer "
                                   "tensor-parallel ranks");
  c.recipe.model.vocab_size = 897;
  EXPECT_EQ(refusal(c, Job::Eval), "");
}

TEST(EngineSupport, GenerationRunsOnlyTensorParallelismOverEveryRank) {
  recipe::CompiledRecipe c = gpt(2);
  c.recipe.parallel.tensor = 1;  // two ranks, one of them idle
  EXPECT_THAT(refusal(c, Job::Generate), HasSubstr("generation splits the model over every rank"));
  c = gpt(2);
  c.recipe.parallel.pipeline = 2;
  EXPECT_THAT(refusal(c, Job::Generate), HasSubstr("generation splits the model over every rank"));
  c.world_size = 4;
  EXPECT_EQ(refusal(c, Job::Eval), "");  // eval runs pipelines
}

TEST(EngineSupport, EveryJobOnCudaRefusesHeadsWiderThanItsAttentionKernels) {
  recipe::CompiledRecipe c = gpt();
  c.recipe.cluster.device = recipe::DeviceKind::Cuda;
  c.derived.head_dim = 256;
  for (const Job job : {Job::Train, Job::Eval, Job::Generate})
    EXPECT_THAT(refusal(c, job), HasSubstr("model.kv_channels: attention heads of 256 channels"));
}

TEST(EngineSupport, OnlyRelativePositionsStayOnOnePipelineStage) {
  EXPECT_EQ(pipeline_refusal(model::PositionEmbedding::Relative, 1), "");
  EXPECT_EQ(pipeline_refusal(model::PositionEmbedding::Relative, 2),
            "T5's relative positions train on one pipeline stage so far");
  EXPECT_EQ(pipeline_refusal(model::PositionEmbedding::Learned, 4), "");
  EXPECT_EQ(pipeline_refusal(model::PositionEmbedding::Rotary, 4), "");
}

}  // namespace engine_support_test
}  // namespace megatron::plan
