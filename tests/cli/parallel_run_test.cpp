// `megatron run --nproc N` under every parallel layout trains the same model as one process:
// the loss and gradient norm of every iteration match, with dropout off and on, in f32, bf16
// and f16. Also: bad layouts are refused before any rank starts, and a dead rank does not hang
// the job.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace parallel_run_test {

std::vector<Iteration> train(int nproc, const std::string& overrides) {
  test_support::TempDir dir;
  const auto r = run_job("run " + launch_args(nproc) + kModel + overrides + " --run-dir " +
                         dir.path().string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return read_metrics(dir.path());
}

// The one-process runs, trained once per setting.
const std::vector<Iteration>& reference(const std::string& overrides) {
  static std::map<std::string, std::vector<Iteration>> runs;
  auto it = runs.find(overrides);
  if (it == runs.end()) it = runs.emplace(overrides, train(1, overrides)).first;
  return it->second;
}

void expect_same_run(const std::vector<Iteration>& one, const std::vector<Iteration>& many,
                     double tolerance) {
  ASSERT_EQ(one.size(), 10u);
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_NEAR(many[i].loss, one[i].loss, tolerance * std::abs(one[i].loss));
    EXPECT_NEAR(many[i].grad_norm, one[i].grad_norm, tolerance * std::abs(one[i].grad_norm));
    EXPECT_EQ(many[i].skipped, one[i].skipped);
  }
}

struct Layout {
  const char* name;
  int nproc;
  const char* overrides;
};

// f32: the layouts compute the same sums in another order (partial GEMMs summed by
// all-reduce, gradients accumulated per rank and then across ranks), so results differ by f32
// rounding, about 1e-7 relative per operation. Adam divides each gradient by its own running
// RMS, which carries those differences into the weights at full size, and ten iterations
// compound them: measured up to 6e-6 relative (dropout on). 5e-5 leaves room for that and is
// still far below what any real mismatch gives (a wrong dropout mask or a dropped gradient moves
// the loss by 1e-3 or more).
constexpr double kF32Tolerance = 5e-5;

class ParallelRun : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelRun, MatchesOneProcessStepForStep) {
  expect_same_run(reference(""), train(GetParam().nproc, GetParam().overrides), kF32Tolerance);
}

TEST_P(ParallelRun, MatchesOneProcessStepForStepWithDropout) {
  expect_same_run(reference(kDropout), train(GetParam().nproc, kDropout + GetParam().overrides),
                  kF32Tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ParallelRun,
    ::testing::Values(
        Layout{"tp2", 2, "parallel.tensor=2"},
        Layout{"tp2_sp", 2, "parallel.tensor=2 parallel.sequence_parallel=true"},
        Layout{"pp2", 2, "parallel.pipeline=2"},
        Layout{"pp4_interleaved", 4, "parallel.pipeline=4 parallel.virtual_pipeline=2"},
        Layout{"dp2", 2, ""},
        Layout{"dp2_distributed_optimizer", 2, "parallel.distributed_optimizer=true"},
        Layout{"tp2_pp2_dp2_sp_distributed_optimizer", 8,
               "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true"}),
    [](const auto& info) { return std::string(info.param.name); });

// 16 bits: each layout rounds its partial sums to the model's dtype before they are added
// (one process rounds the whole sum once), a rounding of the dtype's epsilon (bf16 4e-3, f16
// 5e-4) in every activation. Measured: bf16 2.5e-3, f16 1e-3 relative; the tolerances are
// 4x that, well below the 5e-2 by which bf16 and f32 runs differ.
TEST(ParallelRun16Bit, Bf16TensorPipelineSequenceParallelMatchesOneProcess) {
  const std::string bf16 = "precision.dtype=bf16 ";
  expect_same_run(reference(bf16),
                  train(4, bf16 + "parallel.tensor=2 parallel.pipeline=2 "
                                  "parallel.sequence_parallel=true"),
                  1e-2);
}

TEST(ParallelRun16Bit, F16DataTensorDistributedOptimizerMatchesOneProcess) {
  const std::string f16 = "precision.dtype=f16 precision.initial_loss_scale=4096 ";
  expect_same_run(reference(f16),
                  train(4, f16 + "parallel.tensor=2 parallel.distributed_optimizer=true"), 4e-3);
}

// Llama's shape exercises what gpt-tiny does not: rotary positions, RMSNorm, SwiGLU (its fused
// fc1 split gate and up alike), grouped-query attention (2 query groups split over 2 ranks), no
// biases, an untied output layer on the last stage, and full recompute of each stage's first
// block.
TEST(ParallelRun, ALlamaShapedModelUnderTensorPipelineAndSequenceParallelMatchesOneProcess) {
  const std::string llama =
      "model.position_embedding=rope model.normalization=rmsnorm model.activation=swiglu "
      "model.num_query_groups=2 model.add_bias_linear=false model.tie_embeddings=false "
      "training.recompute=full training.recompute_num_layers=1 " + kDropout;
  expect_same_run(reference(llama),
                  train(4, llama + "parallel.tensor=2 parallel.pipeline=2 "
                                   "parallel.sequence_parallel=true"),
                  kF32Tolerance);
}

// Qwen3's q/k norms: each tensor-parallel rank normalises its own heads with the layer's one pair
// of [kv_channels] weights, so their gradients are summed over the ranks even without sequence
// parallelism (where no other replicated parameter needs it).
TEST(ParallelRun, QkNormsUnderTensorAndDataParallelismWithTheDistributedOptimizerMatchOneProcess) {
  const std::string qwen3 =
      "model.position_embedding=rope model.normalization=rmsnorm model.activation=swiglu "
      "model.qk_layernorm=true model.num_query_groups=2 model.add_bias_linear=false " + kDropout;
  expect_same_run(reference(qwen3),
                  train(4, qwen3 + "parallel.tensor=2 parallel.distributed_optimizer=true"),
                  kF32Tolerance);
}

// Packed documents (the mock walk ends a document at each jump, about every 16 tokens): the
// block-diagonal attention, restarted positions and unscored end-of-document tokens under
// tensor, pipeline, sequence and data parallelism with the distributed optimizer and dropout.
TEST(ParallelRun, PackedDocumentsUnderEveryKindOfParallelismMatchOneProcess) {
  const std::string packed =
      "data.reset_attention_mask=true data.reset_position_ids=true data.eod_mask_loss=true " +
      kDropout;
  expect_same_run(reference(packed),
                  train(8, packed + "parallel.tensor=2 parallel.pipeline=2 "
                                    "parallel.sequence_parallel=true "
                                    "parallel.distributed_optimizer=true"),
                  kF32Tolerance);
}

// The fused classifier (on in every run above) against one process that keeps the whole logits:
// under tensor parallelism each chunk of rows combines its vocabulary shards, and with data
// parallelism and the distributed optimizer the output layer's gradient, accumulated during the
// forwards, is complete before its bucket is reduced.
TEST(ParallelRun, FusedClassifierUnderTensorDataAndPipelineParallelismMatchesOneUnfusedProcess) {
  expect_same_run(reference("training.fused_classifier=false " + kDropout),
                  train(8, kDropout + "parallel.tensor=2 parallel.pipeline=2 "
                                      "parallel.virtual_pipeline=2 parallel.sequence_parallel=true "
                                      "parallel.distributed_optimizer=true"),
                  kF32Tolerance);
}

TEST(ParallelRun, AllForwardAllBackwardWithDataParallelGradientAccumulationMatchesOneProcess) {
  // 2 data-parallel ranks x 2 stages, 2 micro-batches per rank accumulated before the reduction.
  expect_same_run(reference(""),
                  train(4, "parallel.pipeline=2 parallel.schedule=all-forward-all-backward"),
                  kF32Tolerance);
}

TEST(ParallelRun, AWorldThatTheLayoutDoesNotDivideIsRefusedBeforeAnyRankStarts) {
  const auto r = run_megatron("run --nproc 3 " + kModel + "parallel.tensor=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("megatron: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("world size 3"), std::string::npos) << r.err;
}

TEST(ParallelRun, HeadsThatTensorParallelismDoesNotDivideAreRefusedBeforeAnyRankStarts) {
  const auto r = run_megatron("run --nproc 3 " + kModel + "parallel.tensor=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("num_attention_heads (4) is not divisible by parallel.tensor (3)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ParallelRun, ADataParallelSizeThatIsNotTheWorldsIsRefusedBeforeAnyRankStarts) {
  const auto r = run_megatron("run --nproc 2 " + kModel + "parallel.data=4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("set parallel.data to 2"), std::string::npos) << r.err;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ParallelRun, UnderMpirunABadLayoutIsReportedOnceNotByEveryRank) {
  test_support::TempDir dir;
  const std::string err = (dir.path() / "stderr").string();
  const std::string command = std::string("cd '") + MEGATRON_SOURCE_DIR +
                              "' && " + mpi_sanitizer_env() + " mpirun --allow-run-as-root -np 2 '" + MEGATRON_BINARY +
                              "' run " + kModel + "parallel.tensor=4 2>'" + err + "' >/dev/null";
  const int status = std::system(command.c_str());
  EXPECT_NE(status, 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(count(text, "megatron: error: "), 1u) << text;
  EXPECT_NE(text.find("does not divide the world size 2"), std::string::npos) << text;
}

}  // namespace parallel_run_test
}  // namespace megatron::cli

namespace megatron::cli {
namespace parallel_run_test {

struct Timed {
  CommandResult result;
  double seconds = 0;
};

// A 2-rank job of 20 iterations in which MEGATRON_FAULT strikes rank 1 at iteration 3; `timeout`
// guards the test itself against the hang it is checking for.
Timed run_with_fault(const std::string& fault) {
  test_support::TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  Timed t{.result = run_megatron_with_env(
              mpi_sanitizer_env() + " MEGATRON_FAULT=" + fault + " timeout -s KILL 120",
              "run --nproc 2 " + kModel + "training.train_iters=20 parallel.timeout_minutes=0.05 "
              "--run-dir " + dir.path().string())};
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

TEST(ParallelRun, ARankThatHangsMakesItsPeerExitWithTheWatchdogMessageWithinTheTimeout) {
  const Timed t = run_with_fault("hang:rank=1:iteration=3");
  EXPECT_NE(t.result.exit_code, 0);
  EXPECT_NE(t.result.exit_code, 137) << "killed by the test's own timeout: the job hung";
  // 3 s timeout; start-up, two iterations and mpirun's teardown take a few more.
  EXPECT_LT(t.seconds, 60.0);
  EXPECT_NE(t.result.err.find("megatron: error: rank 0: "), std::string::npos) << t.result.err;
  EXPECT_NE(t.result.err.find("did not complete within 3 s at iteration 3: a peer rank died or "
                              "is stuck"),
            std::string::npos)
      << t.result.err;
}

TEST(ParallelRun, ARankThatIsKilledMakesItsPeerExitSayingWhereItWaitedInsteadOfHanging) {
  // mpirun sees the death itself and stops the other ranks with SIGTERM at once, before the
  // timeout: the survivor's watchdog reports the collective it was blocked in.
  const Timed t = run_with_fault("kill:rank=1:iteration=3");
  EXPECT_NE(t.result.exit_code, 0);  // 137: mpirun passes on the killed rank's status
  EXPECT_LT(t.seconds, 60.0);         // the test's own timeout would take 120 s
  EXPECT_NE(t.result.err.find("megatron: error: rank 0: stopped by SIGTERM in "),
            std::string::npos)
      << t.result.err;
  EXPECT_NE(t.result.err.find("(2 ranks), waiting for "), std::string::npos) << t.result.err;
  EXPECT_NE(t.result.err.find("at iteration 3: the launcher ends the job"), std::string::npos)
      << t.result.err;
}

}  // namespace parallel_run_test
}  // namespace megatron::cli
