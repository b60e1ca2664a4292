// megatron submit without a Slurm: the batch script --dry-run prints (every cluster key in it),
// the recipe compiled first, and one-line refusals. tests/slurm/ submits to a real Slurm.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace submit_test {

const std::string kTiny =
    "submit recipes/gpt-tiny.yaml data.mock=true checkpoint.save=/shared/ckpt ";

CommandResult dry_run(const std::string& extra) {
  return run_megatron(kTiny + extra + " --run-dir /shared/runs/a --dry-run");
}

TEST(Submit, DryRunPrintsTheAllocationOfTheClusterSection) {
  const CommandResult r = dry_run("cluster.nodes=2 cluster.gpus_per_node=4 parallel.data=8 training.global_batch_size=64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --nodes=2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#SBATCH --ntasks-per-node=4\n"), std::string::npos);
  EXPECT_NE(r.out.find("#SBATCH --job-name=gpt-tiny\n"), std::string::npos);
  EXPECT_NE(r.out.find("#SBATCH --output=/shared/runs/a/slurm-%j.out\n"), std::string::npos);
  EXPECT_EQ(r.out.find("--gpus-per-node"), std::string::npos) << "a cpu recipe asks for no GPUs";
  EXPECT_NE(r.out.find("srun --mpi=pmix "), std::string::npos);
  EXPECT_NE(r.out.find(" run " + std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-tiny.yaml "
                       "data.mock=true checkpoint.save=/shared/ckpt cluster.nodes=2"),
            std::string::npos);
}

TEST(Submit, EveryClusterKeyReachesTheScript) {
  const CommandResult r = dry_run(
      "cluster.partition=batch cluster.account=proj cluster.qos=high cluster.constraint='h100&ib' "
      "cluster.time_limit=1-12:00:00 cluster.exclusive=true cluster.cpus_per_task=16 "
      "cluster.mail_user=me@example.org cluster.mail_type=END,FAIL cluster.job_name=big "
      "cluster.signal_seconds=600 'cluster.sbatch=[--reservation=r1, --dependency=singleton]' "
      "'cluster.srun=[--container-image=nvcr.io/nvidia/pytorch:24.05-py3]' "
      "'cluster.setup=[module load cuda, source /opt/env.sh]'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"#SBATCH --partition=batch\n", "#SBATCH --account=proj\n", "#SBATCH --qos=high\n",
        "#SBATCH --constraint=h100&ib\n", "#SBATCH --time=1-12:00:00\n", "#SBATCH --exclusive\n",
        "#SBATCH --cpus-per-task=16\n", "export OMP_NUM_THREADS=16\n",
        "#SBATCH --mail-user=me@example.org\n", "#SBATCH --mail-type=END,FAIL\n",
        "#SBATCH --job-name=big\n", "#SBATCH --signal=USR1@600\n", "#SBATCH --requeue\n",
        "#SBATCH --reservation=r1\n", "#SBATCH --dependency=singleton\n",
        "srun --mpi=pmix --container-image=nvcr.io/nvidia/pytorch:24.05-py3 ",
        "module load cuda\nsource /opt/env.sh\n", "--stopped-exit-code 75\n",
        "scontrol requeue \"$SLURM_JOB_ID\"\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " missing from\n" << r.out;
  }
}

TEST(Submit, WithoutRequeueTheScriptNeitherSignalsNorRequeues) {
  const CommandResult r = dry_run("cluster.requeue=false");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --no-requeue\n"), std::string::npos);
  EXPECT_EQ(r.out.find("--signal"), std::string::npos);
  EXPECT_EQ(r.out.find("scontrol requeue"), std::string::npos);
  EXPECT_EQ(r.out.find("--stopped-exit-code"), std::string::npos);
}

TEST(Submit, AGpuRecipeAsksForItsGpus) {
  const CommandResult r = run_megatron(
      "submit recipes/gpt-175b.yaml checkpoint.save=/shared/ckpt cluster.time_limit=2-00:00:00 "
      "--run-dir /shared/runs/b --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --nodes=128\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n"),
            std::string::npos)
      << r.out;
}

TEST(Submit, ARecipeWhoseLayoutDoesNotFillTheClusterIsRefusedBeforeSlurm) {
  const CommandResult r = dry_run("cluster.gpus_per_node=2 parallel.data=4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("megatron: error: "), std::string::npos) << r.err;
}

TEST(Submit, RequeueWithoutACheckpointDirectoryIsRefused) {
  const CommandResult r = run_megatron("submit recipes/gpt-tiny.yaml data.mock=true --dry-run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("checkpoint.save is unset"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cluster.requeue=false"), std::string::npos) << r.err;
}

TEST(Submit, ValuesThatWouldChangeTheScriptAreRefusedAtTheirKey) {
  for (const char* bad : {"cluster.partition='a b'", "cluster.account='x;rm'",
                          "cluster.mail_type=SOMETIMES", "'cluster.sbatch=[reservation=r1]'",
                          "cluster.time_limit=5 cluster.signal_seconds=300",
                          "cluster.signal_seconds=30"}) {
    const CommandResult r = dry_run(bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(r.out, "") << bad;
    EXPECT_NE(r.err.find("megatron: error: override 'cluster."), std::string::npos) << bad << ": " << r.err;
  }
}

TEST(Submit, ARecipeFileNameThatCannotBeAJobNameAsksForOne) {
  test_support::TempDir dir;
  const auto recipe = dir.path() / "my run.yaml";
  const std::filesystem::path recipes = std::string(MEGATRON_SOURCE_DIR) + "/recipes";
  std::filesystem::copy_file(recipes / "gpt-tiny.yaml", recipe);
  std::filesystem::copy(recipes / "base", dir.path() / "base", std::filesystem::copy_options::recursive);
  const std::string args = "submit '" + recipe.string() +
                           "' data.mock=true checkpoint.save=/shared/ckpt --run-dir /shared/runs/c --dry-run";
  const CommandResult refused = run_megatron(args);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("set cluster.job_name=NAME"), std::string::npos) << refused.err;
  const CommandResult named = run_megatron(args + " cluster.job_name=myrun");
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(named.out.find("#SBATCH --job-name=myrun\n"), std::string::npos);
}

TEST(Submit, WithoutSbatchItSaysWhereItRuns) {
  const CommandResult r = run_megatron_with_env(
      "PATH=/nonexistent", kTiny + "--run-dir /tmp/megatron-submit-test-never");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sbatch was not found"), std::string::npos) << r.err;
}

}  // namespace submit_test
}  // namespace megatron::cli
