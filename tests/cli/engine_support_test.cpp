// What the engine cannot run yet is refused alike by `megatron plan` and `megatron run`: one line
// naming the recipe file and the key to change, exit code 2, before any rank starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"

namespace megatron::cli {
namespace engine_support_test {

using ::testing::StartsWith;

struct Refusal {
  const char* name;
  const char* recipe;
  const char* overrides;
  int nproc;            // ranks the layout needs: `plan` gets them as cluster.gpus_per_node
  const char* message;  // the whole line after "megatron: error: "
};

class EngineRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(EngineRefusal, PlanAndRunRefuseItWithTheSameLine) {
  const Refusal& r = GetParam();
  const std::string expected =
      std::string("megatron: error: ") + r.recipe + ": " + r.message + "\n";
  const CommandResult plan = run_megatron(std::string("plan ") + r.recipe + " " + r.overrides +
                                          " cluster.gpus_per_node=" + std::to_string(r.nproc));
  EXPECT_EQ(plan.exit_code, 2) << plan.err;
  EXPECT_EQ(plan.err, expected);
  const CommandResult run = run_job("run " + launch_args(r.nproc) + r.recipe + " " + r.overrides);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.err, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Refusals, EngineRefusal,
    ::testing::Values(
        Refusal{"context_parallelism", "recipes/gpt-tiny.yaml", "parallel.context=2", 2,
                "parallel.context: context parallelism does not train yet; set "
                "parallel.context=1"},
        Refusal{"t5_relative_positions_on_a_pipeline", "recipes/t5-tiny.yaml",
                "parallel.pipeline=2 model.position_embedding=relative", 2,
                "parallel.pipeline: T5's relative positions train on one pipeline stage so far; "
                "set parallel.pipeline=1 or model.position_embedding: learned or rope"},
        Refusal{"cuda_heads_wider_than_its_attention", "recipes/gpt-tiny.yaml",
                "model.kv_channels=256 cluster.device=cuda", 1,
                "model.kv_channels: attention heads of 256 channels are wider than the CUDA "
                "attention's 128; use more heads (model.num_attention_heads) or run on the cpu"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace engine_support_test
}  // namespace megatron::cli
