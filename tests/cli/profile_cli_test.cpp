// `megatron run --profile` as a user runs it: the per-op table on the log, the JSON table and the
// Chrome trace in the run directory, for the ranks asked, and the same losses as without it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace profile_cli_test {

const std::string kSmall =
    "recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=32 model.num_attention_heads=2 "
    "model.vocab_size=96 data.seq_length=16 training.micro_batch_size=2 "
    "training.global_batch_size=4 training.lr_warmup_iters=1 training.train_iters=4 "
    "logging.interval=1 ";

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(ProfileCommand, WritesThePerOpTableAndTraceOfTheProfiledIterations) {
  test_support::TempDir dir;
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile --profile-steps 2:4 --run-dir " +
                              dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profiling iterations 2 to 3 on rank 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("profile of rank 0, iterations 2-3:"), std::string::npos) << r.out;
  const nlohmann::json table = read_json(dir.path() / "profile" / "rank-0.json");
  ASSERT_EQ(table["steps"].size(), 2u);
  EXPECT_EQ(table["steps"][0]["iteration"], 2);
  double share = 0.0;
  bool gemm = false, attention = false, adam = false;
  for (const auto& row : table["ops"]) {
    share += row["share"].get<double>();
    gemm |= row["op"] == "gemm" && row["tflops_per_s"].get<double>() > 0.0;
    attention |= row["op"] == "attention_backward";
    adam |= row["op"] == "adamw_update_many";
  }
  EXPECT_TRUE(gemm && attention && adam) << table.dump(1);
  // Ops lie inside their steps; what is left is host work (most of a step this small, when
  // other tests load the machine).
  EXPECT_GT(share, 0.0);
  EXPECT_LE(share, 1.0 + 1e-9);
  EXPECT_NEAR(table["ops_ms"].get<double>() + table["outside_ops_ms"].get<double>(),
              table["step_ms"].get<double>(), 1e-9);
  EXPECT_GT(table["peak_tensor_bytes"].get<int64_t>(), 0);
  const nlohmann::json trace = read_json(dir.path() / "profile" / "rank-0.trace.json");
  EXPECT_GT(trace["traceEvents"].size(), table["ops"].size());
}

TEST(ProfileCommand, ProfilingLeavesTheLossesUnchanged) {
  test_support::TempDir plain, profiled;
  ASSERT_EQ(run_megatron("run --threads 1 " + kSmall + "--run-dir " + plain.path().string()).exit_code, 0);
  ASSERT_EQ(run_megatron("run --threads 1 " + kSmall + "--profile-steps 1:3 --run-dir " +
                         profiled.path().string()).exit_code, 0);
  const auto a = read_metrics(plain.path()), b = read_metrics(profiled.path());
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].loss, b[i].loss) << "iteration " << i + 1;
  EXPECT_TRUE(std::filesystem::exists(profiled.path() / "profile" / "rank-0.json"));
}

TEST(ProfileCommand, OnlyTheListedRanksProfileIntoRankZerosRunDirectory) {
  test_support::TempDir dir;
  const auto r = run_job("run --nproc 2 " + kSmall + "--profile-steps 2:3 --profile-ranks 1 --run-dir " +
                         dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "profile" / "rank-1.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "profile" / "rank-1.trace.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "profile" / "rank-0.json"));
}

TEST(ProfileCommand, StepsThatEndBeforeTheyStartAreRefused) {
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile-steps 3:3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("logging.profile_step_end (3) must be after profile_step_start (3)"),
            std::string::npos) << r.err;
}

TEST(ProfileCommand, StepsThatAreNotStartColonEndAreRefused) {
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile-steps 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--profile-steps 3: expected START:END"), std::string::npos) << r.err;
}

TEST(ProfileCommand, ARankOutsideTheWorldIsRefused) {
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile-steps 2:3 --profile-ranks 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("logging.profile_ranks lists rank 2 but the world has 1 rank (0..0)"),
            std::string::npos) << r.err;
}

TEST(ProfileCommand, ANegativeRankIsRefusedByTheFlag) {
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile-ranks=-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--profile-ranks: Value -1 not in range 0 to 1000000"), std::string::npos)
      << r.err;
}

TEST(ProfileCommand, AStartAfterTheLastIterationIsRefused) {
  const auto r = run_megatron("run --threads 1 " + kSmall + "--profile");  // default 10:12, 4 iterations
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("logging.profile_step_start is 10 but training stops after iteration 4"),
            std::string::npos) << r.err;
}

}  // namespace profile_cli_test
}  // namespace megatron::cli
