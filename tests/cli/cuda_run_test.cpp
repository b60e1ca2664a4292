// `megatron run` on CUDA: a GPU run of the tiny GPT follows the CPU run's losses, every parallel
// layout works over NCCL, and asking for a GPU where there is none fails with what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/run_command.hpp"
#include "cli/tiny_bert.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::cli {
namespace cuda_run_test {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string k20Iterations = "training.train_iters=20 eval.interval=null ";

std::vector<Iteration> train(const std::string& launch, const std::string& overrides) {
  test_support::TempDir dir;
  const auto r = run_job("run " + launch + kModel + k20Iterations + overrides + " --run-dir " +
                         dir.path().string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return read_metrics(dir.path());
}

// Loss and gradient norm of each of 20 iterations within `tolerance`, relative.
void expect_same_losses(const std::vector<Iteration>& cpu, const std::vector<Iteration>& gpu,
                        double tolerance) {
  ASSERT_EQ(cpu.size(), 20u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_NEAR(gpu[i].loss, cpu[i].loss, tolerance * std::abs(cpu[i].loss));
    EXPECT_NEAR(gpu[i].grad_norm, cpu[i].grad_norm, tolerance * std::abs(cpu[i].grad_norm));
  }
}

TEST(CudaRun, AskingForAGpuWhereThereIsNoneSaysHowToRunOnTheCpu) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: this checks its absence";
  test_support::TempDir dir;
  const auto r = run_megatron("run recipes/gpt-tiny.yaml --device cuda training.train_iters=1 "
                              "training.lr_warmup_iters=0 "
                              "--run-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: "));
  EXPECT_THAT(r.err, AnyOf(HasSubstr("no CUDA device is visible"), HasSubstr("built without CUDA")));
  EXPECT_THAT(r.err, HasSubstr("--device cpu"));
}

TEST(CudaRun, AGpuHardwareProfileMeansCudaUnlessTheRecipeSaysCpu) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: this checks its absence";
  test_support::TempDir dir;
  const std::string args = "run " + kModel + "training.train_iters=1 cluster.hardware=h100-sxm ";
  const auto gpu = run_megatron(args + "--run-dir " + (dir.path() / "a").string());
  EXPECT_EQ(gpu.exit_code, 2) << gpu.err;
  const auto cpu = run_megatron(args + "cluster.device=cpu --run-dir " + (dir.path() / "b").string());
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
}

// f32 without TF32: the GPU sums the same products in other orders (cuBLASLt's tiles, the
// kernels' tree reductions), about 1e-7 relative per operation. Adam carries that into the
// weights and 20 iterations compound it, as between parallel layouts on the CPU (5e-5 for 10
// iterations there); 2e-4 leaves room for twice the iterations and stays far below what a
// wrong kernel gives (1e-2 and more).
TEST(CudaRun, TinyGptOnTheGpuFollowsTheCpuInF32) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  const std::string f32 = "precision.allow_tf32=false ";
  expect_same_losses(train("--threads 1 ", f32), train("--device cuda ", f32), 2e-4);
}

TEST(CudaRun, TinyGptOnTheGpuFollowsTheCpuWithDropout) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  // The GPU draws the CPU's dropout masks (the same Philox counters), so only rounding differs.
  const std::string f32 = "precision.allow_tf32=false " + kDropout;
  expect_same_losses(train("--threads 1 ", f32), train("--device cuda ", f32), 2e-4);
}

// bf16: both backends store bf16 and compute in f32, but a value that lands near a rounding
// boundary of bf16 (8 significant bits) rounds differently after a different summation order,
// a 4e-3 relative step; averaged over the model the loss moves far less. 2e-2 bounds it over
// 20 iterations, still below the 1e-1 a wrong kernel gives.
TEST(CudaRun, TinyGptOnTheGpuFollowsTheCpuInBf16) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  const std::string bf16 = "precision.dtype=bf16 ";
  expect_same_losses(train("--threads 1 ", bf16), train("--device cuda ", bf16), 2e-2);
}

// BERT on the GPU: bidirectional attention over the padding mask, token types, the LM head's
// transform and bias, the pooler and binary head; both losses follow the CPU's (the f32 bound
// above, over 10 iterations).
TEST(CudaRun, TinyBertOnTheGpuFollowsTheCpuInF32) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  const auto bert = [](const std::string& launch) {
    test_support::TempDir dir;
    const auto r = run_job("run " + launch + bert_model() + "precision.allow_tf32=false " + kDropout +
                           "--run-dir " + dir.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_metrics(dir.path());
  };
  const std::vector<Iteration> cpu = bert("--threads 1 "), gpu = bert("--device cuda ");
  ASSERT_EQ(cpu.size(), 10u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_NEAR(gpu[i].loss, cpu[i].loss, 2e-4 * std::abs(cpu[i].loss));
    EXPECT_NEAR(gpu[i].sop_loss, cpu[i].sop_loss, 2e-4 * std::abs(cpu[i].sop_loss));
    EXPECT_NEAR(gpu[i].grad_norm, cpu[i].grad_norm, 2e-4 * std::abs(cpu[i].grad_norm));
  }
}

struct Layout {
  const char* name;
  int nproc;
  const char* overrides;
};

class CudaParallelRun : public ::testing::TestWithParam<Layout> {};

// NCCL needs one GPU per rank; the layouts of the parallelism tests, compared with one GPU.
TEST_P(CudaParallelRun, MatchesOneGpu) {
  const int gpus = tensor::cuda_device_count();
  if (gpus < GetParam().nproc) {
    GTEST_SKIP() << "needs " << GetParam().nproc << " GPUs (NCCL runs one rank per GPU); this "
                 << "machine has " << gpus << ": GPU test skipped";
  }
  const std::string f32 = "precision.allow_tf32=false ";
  expect_same_losses(train("--device cuda ", f32),
                     train("--device cuda --nproc " + std::to_string(GetParam().nproc) + " ",
                           f32 + GetParam().overrides),
                     2e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaParallelRun,
    ::testing::Values(
        Layout{"tp2_sp", 2, "parallel.tensor=2 parallel.sequence_parallel=true"},
        Layout{"pp2", 2, "parallel.pipeline=2"},
        Layout{"dp2_distopt", 2, "parallel.distributed_optimizer=true"},
        Layout{"pp4_interleaved", 4, "parallel.pipeline=4 parallel.virtual_pipeline=2"},
        Layout{"tp2_pp2_dp2_sp_distopt", 8,
               "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace cuda_run_test
}  // namespace megatron::cli
