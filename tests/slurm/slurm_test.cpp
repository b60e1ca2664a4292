// megatron submit on a real Slurm (slurmctld + slurmd on this machine, started for these tests
// by scripts/slurm-local.sh): a 2-task job trains as --nproc 2 does, a job signalled mid-run
// saves, requeues itself and finishes bitwise as an uninterrupted run, and Slurm accepts the
// script written for gpt-175b on 128 nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace {

namespace fs = std::filesystem;

const std::string kConf = MEGATRON_SLURM_CONF;

// A tiny GPT on mock data, 2 data-parallel ranks of one CPU thread each; its 100 iterations
// (about 25 ms each here) leave the signal time to arrive mid-run.
const std::string kJob =
    "recipes/gpt-tiny.yaml model.num_layers=4 model.hidden_size=64 model.num_attention_heads=4 "
    "model.vocab_size=256 data.seq_length=64 training.micro_batch_size=2 "
    "training.global_batch_size=8 training.lr_warmup_iters=1 training.train_iters=100 "
    "logging.interval=1 data.mock=true parallel.data=2 cluster.gpus_per_node=2 "
    "cluster.cpus_per_task=1 ";

bool slurm_is_up() { return fs::exists(kConf); }

// A shell command's stdout, run with this Slurm's configuration.
std::string shell(const std::string& command) {
  const std::string line = "SLURM_CONF='" + kConf + "' " + command + " 2>&1";
  std::string out;
  if (FILE* p = popen(line.c_str(), "r")) {
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, p)) out.append(buffer, n);
    pclose(p);
  }
  return out;
}

std::string job_field(const std::string& id, const std::string& field) {
  const std::string info = shell("scontrol show job " + id);
  const size_t at = info.find(field + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + field.size() + 1;
  return info.substr(start, info.find_first_of(" \n", start) - start);
}

// Waits for the job to end (at most two minutes) and returns its final state.
std::string wait_for_end(const std::string& id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2) + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string state = job_field(id, "JobState");
    if (state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
        state == "NODE_FAIL" || state == "OUT_OF_MEMORY")
      return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  shell("scancel " + id);
  return "still running after 2.5 minutes";
}

std::string submit(const fs::path& dir, const std::string& extra = "") {
  const CommandResult r = run_megatron_with_env(
      "SLURM_CONF='" + kConf + "' " + mpi_sanitizer_env(),
      "submit " + kJob + "checkpoint.save=" + (dir / "ckpt").string() + " " + extra +
          " --run-dir " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  return id;
}

// The same training under --nproc 2 (mpirun), computed once.
const std::vector<Iteration>& reference() {
  static const std::vector<Iteration> losses = [] {
    test_support::TempDir dir;
    const CommandResult r = run_job("run " + kJob + "--nproc 2 --run-dir " + (dir.path() / "run").string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_metrics(dir.path() / "run");
  }();
  return losses;
}

void expect_same_losses(const std::vector<Iteration>& got) {
  const std::vector<Iteration>& want = reference();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].iteration, want[i].iteration);
    EXPECT_EQ(got[i].loss, want[i].loss) << "iteration " << want[i].iteration;  // bitwise
    EXPECT_EQ(got[i].grad_norm, want[i].grad_norm) << "iteration " << want[i].iteration;
  }
}

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!slurm_is_up())
      GTEST_SKIP() << "Slurm is not installed here: scripts/slurm-local.sh wrote no " << kConf
                   << " (apt-get install slurm-wlm munge)";
  }
  test_support::TempDir dir_;
};

TEST_F(Slurm, ASubmittedJobOfTwoTasksTrainsAsTwoLocalRanks) {
  const std::string id = submit(dir_.path());
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_for_end(id), "COMPLETED") << slurp(dir_.path() / "run" / ("slurm-" + id + ".out"));
  EXPECT_EQ(job_field(id, "Restarts"), "0");
  expect_same_losses(read_metrics(dir_.path() / "run"));
  EXPECT_TRUE(fs::exists(dir_.path() / "run" / "submit.sbatch"));
}

TEST_F(Slurm, ASignalledJobSavesRequeuesAndFinishesAsIfUninterrupted) {
  const std::vector<Iteration>& want = reference();  // before the job, not while it runs
  ASSERT_FALSE(want.empty());
  const std::string id = submit(dir_.path());
  ASSERT_FALSE(id.empty());
  const fs::path metrics = dir_.path() / "run" / "metrics.jsonl";
  // Slurm's --signal=USR1@N at the time limit, sent now: scancel signals the job's steps.
  // A loaded machine (ctest -j) may start the job late: wait up to 2 minutes for it to train.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  // Whole lines only: the job is writing the file while this reads it.
  const auto lines = [&] {
    const std::string text = slurp(metrics);
    return std::count(text.begin(), text.end(), '\n');
  };
  while (lines() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string output_file = (dir_.path() / "run" / ("slurm-" + id + ".out")).string();
  ASSERT_GE(lines(), 3) << "the job trained no 3 iterations in 2 minutes (state "
                        << job_field(id, "JobState") << "): " << slurp(output_file);
  shell("scancel --signal=USR1 " + id);
  EXPECT_EQ(wait_for_end(id), "COMPLETED") << slurp(output_file);
  const std::string output = slurp(output_file);
  EXPECT_EQ(job_field(id, "Restarts"), "1") << output;
  EXPECT_NE(output.find("stopped by SIGUSR1 after saving a checkpoint"), std::string::npos) << output;
  EXPECT_NE(output.find("requeueing job " + id), std::string::npos) << output;
  EXPECT_NE(output.find("slurm: job " + id + " (restart 1), step 0, 1 node(s)"), std::string::npos)
      << output;
  expect_same_losses(read_metrics(dir_.path() / "run"));
}

TEST_F(Slurm, AJobThatFinishedIsNotRequeued) {
  const std::string id = submit(dir_.path(), "training.train_iters=3");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_for_end(id), "COMPLETED");
  // The signal after the end finds no job to stop; the job stays completed, never restarted.
  shell("scancel --signal=USR1 " + id);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(job_field(id, "Restarts"), "0");
  EXPECT_EQ(job_field(id, "JobState"), "COMPLETED");
}

TEST_F(Slurm, SlurmAcceptsTheScriptForGpt175bOn128Nodes) {
  // slurm-local.sh's partition gpu describes 128 nodes of 8 GPUs (never started).
  const std::string args =
      "submit recipes/gpt-175b.yaml cluster.partition=gpu cluster.exclusive=true "
      "checkpoint.save=/shared/ckpt/gpt-175b --run-dir /shared/runs/gpt-175b ";
  const CommandResult ok = run_megatron_with_env("SLURM_CONF='" + kConf + "'",
                                                 args + "cluster.time_limit=2-00:00:00 --test-only");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("to start at"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("8192 processors on nodes gpu[001-128]"), std::string::npos) << ok.out;
  // Over the partition's 14-day limit: Slurm's own answer, one line, exit 2.
  const CommandResult over = run_megatron_with_env(
      "SLURM_CONF='" + kConf + "'", args + "cluster.time_limit=20-00:00:00 --test-only");
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_NE(over.err.find("megatron: error: Slurm would not accept this job: "), std::string::npos)
      << over.err;
  EXPECT_NE(over.err.find("time limit"), std::string::npos) << over.err;
}

}  // namespace
}  // namespace megatron::cli
