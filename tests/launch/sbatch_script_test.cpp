// The batch script `megatron submit` writes, read as sbatch and bash read it: the allocation from
// the recipe's cluster section, GPUs only for a GPU run, and every word a shell word.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "launch/local_job.hpp"
#include "launch/sbatch_script.hpp"
#include "recipe/compile.hpp"

namespace megatron::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

recipe::CompiledRecipe gpt_tiny(std::vector<std::string> overrides) {
  return recipe::compile(std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-tiny.yaml",
                         {.overrides = std::move(overrides)});
}

SbatchRequest request() {
  return {.megatron = "/opt/megatron/bin/megatron",
          .recipe_file = "/work/gpt-tiny.yaml",
          .overrides = {"training.train_iters=10"},
          .run_dir = "/work/runs/a",
          .work_dir = "/work",
          .submitted_by = "megatron submit gpt-tiny.yaml"};
}

TEST(ShellQuote, SafeWordsStayBareAndOthersAreSingleQuoted) {
  EXPECT_EQ(shell_quote("model.hidden_size=64"), "model.hidden_size=64");
  EXPECT_EQ(shell_quote("/a/b.yaml"), "/a/b.yaml");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(SbatchScript, TheAllocationComesFromTheClusterSection) {
  const std::string script =
      sbatch_script(gpt_tiny({"cluster.nodes=2", "cluster.gpus_per_node=4", "cluster.hardware=h100-sxm",
                              "training.global_batch_size=64",
                              "cluster.partition=batch", "cluster.time_limit=01:00:00"}),
                    request());
  EXPECT_THAT(script, HasSubstr("#SBATCH --nodes=2\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --ntasks-per-node=4\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --gpus-per-node=4\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --partition=batch\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --time=01:00:00\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --chdir=/work\n"));
}

TEST(SbatchScript, ACpuRunAsksForNoGpus) {
  const std::string script = sbatch_script(gpt_tiny({"cluster.hardware=cpu"}), request());
  EXPECT_THAT(script, Not(HasSubstr("--gpus-per-node")));
}

TEST(LocalJob, RanksShareTheCoresUnlessTheThreadsAreGiven) {
  EXPECT_EQ(threads_per_rank(3, 8), 3);
  EXPECT_GE(threads_per_rank(0, 1), 1);
  EXPECT_EQ(threads_per_rank(0, 100000), 1);  // never below one thread
}

}  // namespace
}  // namespace megatron::launch
