// Checkpoints as a user meets them through `megatron run`, `convert` and `ckpt inspect`: a
// resumed run is bitwise the straight run; a checkpoint loads under other layouts; signals save
// and stop; a crash during a save, a damaged file or another model never cost a good checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "../ckpt/checkpoint_tamper.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace checkpoint_test {
namespace fs = std::filesystem;

// Same tolerance as the parallel-layout tests (parallel_run_test.cpp says why): another layout
// adds the same numbers in another order.
constexpr double kLayoutTolerance = 5e-5;

struct Training {
  CommandResult result;
  std::vector<Iteration> metrics;
};

Training train(int nproc, const std::string& overrides, const std::string& env = "") {
  test_support::TempDir dir;
  Training run;
  run.result = run_megatron_with_env(mpi_sanitizer_env() + " " + env,
                                     "run " + launch_args(nproc) + kModel + overrides +
                                         " --run-dir " + dir.path().string());
  run.metrics = read_metrics(dir.path());
  return run;
}

// One process that is expected to fail before or while loading; its run directory is dir/run.
CommandResult run_in(const fs::path& dir, const std::string& overrides) {
  return run_megatron("run --threads 1 " + kModel + overrides + " --run-dir " +
                      (dir / "run").string());
}

std::string save_to(const fs::path& dir, int64_t interval) {
  return " checkpoint.save=" + dir.string() + " checkpoint.interval=" + std::to_string(interval) + " ";
}

std::string latest(const fs::path& save) {
  std::ifstream in(save / "latest");
  std::string name;
  std::getline(in, name);
  return name;
}

// Every tensor of a checkpoint, raw, by "kind/name".
std::map<std::string, std::vector<std::byte>> tensors_of(const fs::path& dir) {
  ckpt::CheckpointReader reader(dir);
  std::map<std::string, std::vector<std::byte>> out;
  for (const ckpt::TensorInfo& t : reader.tensors()) {
    const ckpt::Box whole{0, t.shape[0], 0, t.shape.size() > 1 ? t.shape[1] : 1};
    std::vector<std::byte> bytes(size_t(whole.numel()) * tensor::size_of(t.dtype));
    reader.read_raw(t, {whole}, bytes);
    out[t.kind + "/" + t.name] = std::move(bytes);
  }
  return out;
}

// Iterations first..last of `run` equal `straight`'s exactly (bitwise doubles).
void expect_bitwise(const std::vector<Iteration>& straight, const std::vector<Iteration>& resumed,
                    int64_t first) {
  ASSERT_EQ(straight.size(), 10u);
  ASSERT_EQ(resumed.size(), size_t(10 - first + 1));
  for (const Iteration& it : resumed) {
    SCOPED_TRACE("iteration " + std::to_string(it.iteration));
    const Iteration& s = straight[size_t(it.iteration - 1)];
    // Bitwise; a skipped f16 step has a non-finite norm on both sides.
    EXPECT_EQ(it.loss, s.loss);
    if (!(std::isnan(it.grad_norm) && std::isnan(s.grad_norm))) EXPECT_EQ(it.grad_norm, s.grad_norm);
    EXPECT_EQ(it.skipped, s.skipped);
  }
  EXPECT_EQ(resumed.front().iteration, first);
}

void expect_close(const std::vector<Iteration>& straight, const std::vector<Iteration>& resumed,
                  int64_t first) {
  ASSERT_EQ(straight.size(), 10u);
  ASSERT_EQ(resumed.size(), size_t(10 - first + 1));
  for (const Iteration& it : resumed) {
    SCOPED_TRACE("iteration " + std::to_string(it.iteration));
    const Iteration& s = straight[size_t(it.iteration - 1)];
    EXPECT_NEAR(it.loss, s.loss, kLayoutTolerance * std::abs(s.loss));
    EXPECT_NEAR(it.grad_norm, s.grad_norm, kLayoutTolerance * std::abs(s.grad_norm));
  }
}

// ---- exact resume --------------------------------------------------------------------------

class ExactResume : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactResume, ResumedRunIsBitwiseTheStraightRun) {
  test_support::TempDir save;
  const std::string setting = GetParam();
  const Training straight = train(1, setting + save_to(save.path(), 5));
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  const Training resumed =
      train(1, setting + " checkpoint.load=" + (save.path() / "iter_0000005").string());
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  EXPECT_NE(resumed.result.out.find("loaded checkpoint"), std::string::npos) << resumed.result.out;
  expect_bitwise(straight.metrics, resumed.metrics, 6);
  if (setting.find("dtype=f16") != std::string::npos) {
    EXPECT_GT(straight.metrics.back().skipped, straight.metrics[4].skipped);  // overflows after 5
  }
}

// Dropout (random state), 16-bit weights with f32 masters, and f16's dynamic loss scale: it
// doubles every 2 clean steps and overflows at iterations 7 and 10, so the scale and its growth
// count at iteration 5 must come back exactly.
INSTANTIATE_TEST_SUITE_P(
    Settings, ExactResume,
    ::testing::Values("model.hidden_dropout=0.1 model.attention_dropout=0.1",
                      "precision.dtype=bf16",
                      "precision.dtype=f16 precision.initial_loss_scale=262144 "
                      "precision.loss_scale_window=2 precision.hysteresis=1"));

TEST(Checkpoint, ResubmittedJobContinuesFromItsSaveDirectory) {
  test_support::TempDir save;
  const Training straight = train(1, "");
  // A time limit of 6 ms stops after the first iteration, which is saved.
  const Training first = train(1, save_to(save.path(), 100) + "training.exit_duration_minutes=0.0001");
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  EXPECT_EQ(latest(save.path()), "iter_0000001");
  const Training again = train(1, save_to(save.path(), 100));
  ASSERT_EQ(again.result.exit_code, 0) << again.result.err;
  expect_bitwise(straight.metrics, again.metrics, 2);
  EXPECT_EQ(latest(save.path()), "iter_0000010");
}

TEST(Checkpoint, TheRunsOwnCheckpointWinsOverCheckpointLoad) {
  // A fine-tuning job: starts from `load` once, then continues from its own `save`.
  test_support::TempDir pretrained, own;
  ASSERT_EQ(train(1, "training.train_iters=2" + save_to(pretrained.path(), 2)).result.exit_code, 0);
  const std::string job = "checkpoint.load=" + pretrained.path().string() + save_to(own.path(), 1);
  const Training first = train(1, job + " training.train_iters=4 training.exit_duration_minutes=0.0001");
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  ASSERT_EQ(first.metrics.front().iteration, 3);
  EXPECT_EQ(latest(own.path()), "iter_0000003");
  const Training again = train(1, job + " training.train_iters=4");
  ASSERT_EQ(again.result.exit_code, 0) << again.result.err;
  EXPECT_NE(again.result.out.find("rather than checkpoint.load"), std::string::npos) << again.result.out;
  ASSERT_FALSE(again.metrics.empty());
  EXPECT_EQ(again.metrics.front().iteration, 4);
}

// ---- other layouts -------------------------------------------------------------------------

TEST(Checkpoint, SavedUnderOneLayoutContinuesUnderOthers) {
  test_support::TempDir save;
  const Training straight = train(1, "");
  const Training sharded = train(8, "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
                               "parallel.distributed_optimizer=true" + save_to(save.path(), 5));
  ASSERT_EQ(sharded.result.exit_code, 0) << sharded.result.err;
  const std::string load = " checkpoint.load=" + (save.path() / "iter_0000005").string() + " ";
  struct Target {
    int nproc;
    const char* overrides;
  };
  for (const Target& t : {Target{1, ""}, Target{4, "parallel.pipeline=4 parallel.virtual_pipeline=2"},
                          Target{4, "parallel.distributed_optimizer=true"},
                          Target{4, "parallel.tensor=2 parallel.sequence_parallel=true"}}) {
    SCOPED_TRACE(std::to_string(t.nproc) + " ranks: " + t.overrides);
    const Training resumed = train(t.nproc, t.overrides + load);
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
    expect_close(straight.metrics, resumed.metrics, 6);
  }
}

// ---- signals -------------------------------------------------------------------------------

// Starts a long run in the background, waits until it logged `after` iterations, sends `signal`
// to the launched process (megatron, or mpirun that --nproc became) and returns its exit status.
struct SignalledRun {
  int exit_code = -1;
  std::string err;  // the run's log: stdout and stderr together
  std::vector<Iteration> metrics;
};

SignalledRun signal_run(int nproc, const std::string& signal, const fs::path& save) {
  test_support::TempDir dir;
  const fs::path run_dir = dir.path() / "run";
  const std::string script =
      "cd '" + std::string(MEGATRON_SOURCE_DIR) + "'\n" + mpi_sanitizer_env() + " '" +
      MEGATRON_BINARY + "' run " + launch_args(nproc) + kModel +
      "training.train_iters=100000 eval.interval=100000 checkpoint.save=" + save.string() +
      " --run-dir " + run_dir.string() + " >'" + (dir.path() / "err").string() +
      "' 2>&1 &\npid=$!\n"
      "for i in $(seq 1 1200); do\n"
      "  n=$(grep -c lm_loss '" + run_dir.string() + "/metrics.jsonl' 2>/dev/null)\n"
      "  [ \"${n:-0}\" -ge 3 ] && break\n"
      "  sleep 0.1\n"
      "done\n"
      "kill -" + signal + " $pid\n"
      "wait $pid\n"
      "echo $? >'" + (dir.path() / "status").string() + "'\n";
  std::system(("bash " + dir.write("signal.sh", script).string()).c_str());
  SignalledRun out;
  out.err = slurp(dir.path() / "err");
  out.metrics = read_metrics(run_dir);
  std::string status = slurp(dir.path() / "status");
  if (!status.empty()) out.exit_code = std::stoi(status);
  return out;
}

TEST(Checkpoint, SigtermSavesAtTheIterationBoundaryAndExitsZero) {
  test_support::TempDir save;
  const SignalledRun run = signal_run(1, "TERM", save.path());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("stopped by SIGTERM after saving a checkpoint"), std::string::npos) << run.err;
  ASSERT_FALSE(run.metrics.empty());
  const int64_t last = run.metrics.back().iteration;
  const ckpt::CheckpointMeta meta = ckpt::read_checkpoint_meta(save.path() / latest(save.path()));
  EXPECT_EQ(meta.state.iteration, last);
}

TEST(Checkpoint, SigusrToTheLauncherStopsEveryRankAfterOneSave) {
  test_support::TempDir save;
  const SignalledRun run = signal_run(2, "USR1", save.path());  // mpirun forwards SIGUSR1
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_FALSE(run.metrics.empty());
  const ckpt::CheckpointMeta meta = ckpt::read_checkpoint_meta(save.path() / latest(save.path()));
  EXPECT_EQ(meta.state.iteration, run.metrics.back().iteration);
  EXPECT_EQ(meta.layout.world, 2);
}

// ---- failures never cost a good checkpoint -------------------------------------------------

TEST(Checkpoint, KillDuringSaveLeavesLatestAtThePreviousCheckpoint) {
  test_support::TempDir save;
  const Training killed = train(1, save_to(save.path(), 2), "MEGATRON_FAULT=kill_during_save:rank=0:iteration=4");
  EXPECT_NE(killed.result.exit_code, 0);
  EXPECT_EQ(latest(save.path()), "iter_0000002");
  EXPECT_FALSE(fs::exists(save.path() / "iter_0000004"));
  EXPECT_TRUE(fs::exists(save.path() / ".iter_0000004.partial" / "rank_00000.h5"));
  // The resubmitted job continues from iteration 2, exactly, and clears the debris.
  const Training straight = train(1, "");
  const Training again = train(1, save_to(save.path(), 2));
  ASSERT_EQ(again.result.exit_code, 0) << again.result.err;
  expect_bitwise(straight.metrics, again.metrics, 3);
  EXPECT_FALSE(fs::exists(save.path() / ".iter_0000004.partial"));
}

// A saved checkpoint, its files' bytes, and a run that loads it.
struct Damaged : ::testing::Test {
  void SetUp() override {
    const Training run = train(1, "training.train_iters=2" + save_to(save.path(), 2));
    ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
    rank_file = save.path() / "iter_0000002" / "rank_00000.h5";
  }
  CommandResult load() {
    return run_in(save.path(), "checkpoint.load=" + save.path().string());
  }
  test_support::TempDir save;
  fs::path rank_file;
};

TEST_F(Damaged, FlippedBytesAreFoundByTheChecksumWithFileAndTensorNamed) {
  std::string bytes = slurp(rank_file);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i) bytes[i] = char(~bytes[i]);
  std::ofstream(rank_file, std::ios::binary | std::ios::trunc) << bytes;
  const CommandResult r = load();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rank_00000.h5: tensor /"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fails its checksum"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(rank_file), bytes);  // left as it was
}

TEST_F(Damaged, CkptVerifyFindsWhatLoadingWouldRefuse) {
  const CommandResult good = run_megatron("ckpt verify " + save.path().string());
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("every piece's checksum matches"), std::string::npos) << good.out;
  std::string bytes = slurp(rank_file);
  bytes[bytes.size() / 2] = char(~bytes[bytes.size() / 2]);
  std::ofstream(rank_file, std::ios::binary | std::ios::trunc) << bytes;
  const CommandResult bad = run_megatron("ckpt verify " + save.path().string());
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("fails its checksum"), std::string::npos) << bad.err;
}

TEST_F(Damaged, AMissingRankFileIsNamed) {
  std::filesystem::remove(rank_file);
  const CommandResult r = load();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rank_00000.h5: no such file"), std::string::npos) << r.err;
}

TEST_F(Damaged, TruncatedFileIsNamed) {
  const std::string bytes = slurp(rank_file);
  std::ofstream(rank_file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  const CommandResult r = load();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rank_00000.h5"), std::string::npos) << r.err;
}

TEST_F(Damaged, AnotherModelNamesTheFirstDifferingField) {
  const CommandResult r = run_in(save.path(), "model.num_layers=4 checkpoint.load=" + save.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the checkpoint's model.num_layers is 8 but the recipe's is 4"),
            std::string::npos) << r.err;
}

TEST_F(Damaged, APieceShorterThanTheIndexMapsIsRefusedByVerifyLoadingAndConvert) {
  // Its CRC matches its 5 elements: only the geometry check can find it.
  test_support::shorten_piece(rank_file, "/model/decoder.final_layernorm.weight", 5);
  const std::string words = "rank_00000.h5: tensor /model/decoder.final_layernorm.weight holds 5 "
                            "elements, but the index maps elements [0, 32) of it";
  const CommandResult verify = run_megatron("ckpt verify " + save.path().string());
  EXPECT_EQ(verify.exit_code, 2) << verify.err;
  EXPECT_NE(verify.err.find(words), std::string::npos) << verify.err;
  const CommandResult loaded = load();
  EXPECT_EQ(loaded.exit_code, 2) << loaded.err;
  EXPECT_NE(loaded.err.find(words), std::string::npos) << loaded.err;
  test_support::TempDir out;
  const CommandResult converted = run_megatron("convert --quiet --load " + save.path().string() +
                                               " --save " + (out.path() / "new" / "dir").string());
  EXPECT_EQ(converted.exit_code, 2) << converted.err;
  EXPECT_NE(converted.err.find(words), std::string::npos) << converted.err;
  EXPECT_FALSE(fs::exists(out.path() / "new")) << "a failed convert leaves nothing behind";
}

TEST_F(Damaged, UnwritableConvertOutputsNameThePathGivenAndExit2) {
  const CommandResult into_proc = run_megatron("convert --quiet --load " + save.path().string() +
                                               " --save /proc");
  EXPECT_EQ(into_proc.exit_code, 2) << into_proc.err;
  EXPECT_NE(into_proc.err.find("megatron: error: --save /proc: cannot write into this directory"),
            std::string::npos) << into_proc.err;
  const CommandResult hf = run_megatron("convert --to hf --load " + save.path().string() +
                                        " --save /proc/x");
  EXPECT_EQ(hf.exit_code, 2) << hf.err;
  EXPECT_NE(hf.err.find("megatron: error: --save /proc/x: cannot create this directory"),
            std::string::npos) << hf.err;
}

TEST(Checkpoint, AnUnwritableSaveDirectoryIsRefusedBeforeTraining) {
  test_support::TempDir dir;
  const CommandResult r = run_in(dir.path(), "checkpoint.save=/proc/nope");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("checkpoint.save: cannot write to /proc/nope"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("consumed samples"), std::string::npos) << r.err;  // no training happened
}

TEST(Checkpoint, LoadingANonCheckpointIsOneClearLine) {
  test_support::TempDir empty;
  const CommandResult r = run_in(empty.path(), "checkpoint.load=" + empty.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds no checkpoint"), std::string::npos) << r.err;
}

// ---- keeping, async ------------------------------------------------------------------------

TEST(Checkpoint, KeepLastKeepsOnlyTheNewest) {
  test_support::TempDir save;
  const Training run = train(1, save_to(save.path(), 2) + "checkpoint.keep_last=2");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(save.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000008", "iter_0000010", "latest"}));
}

TEST(Checkpoint, AsyncSaveWritesWhatASyncSaveWrites) {
  test_support::TempDir sync_dir, async_dir;
  const Training sync = train(2, save_to(sync_dir.path(), 5));
  const Training async = train(2, save_to(async_dir.path(), 5) + "checkpoint.async_save=true");
  ASSERT_EQ(sync.result.exit_code, 0) << sync.result.err;
  ASSERT_EQ(async.result.exit_code, 0) << async.result.err;
  EXPECT_EQ(latest(async_dir.path()), "iter_0000010");
  for (const char* it : {"iter_0000005", "iter_0000010"}) {
    EXPECT_EQ(tensors_of(async_dir.path() / it), tensors_of(sync_dir.path() / it)) << it;
  }
}

// ---- convert, inspect, h5py ----------------------------------------------------------------

TEST(Checkpoint, ConvertToAnotherLayoutAndBackIsBitwise) {
  test_support::TempDir a, b, back;
  const Training run = train(1, "precision.dtype=bf16 training.train_iters=2" + save_to(a.path(), 2));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const CommandResult to = run_megatron("convert --quiet --load " + a.path().string() + " --save " +
                                        b.path().string() + " --tp 2 --pp 2");
  ASSERT_EQ(to.exit_code, 0) << to.err;
  EXPECT_EQ(ckpt::read_checkpoint_meta(b.path() / "iter_0000002").layout.world, 4);
  const CommandResult from = run_megatron("convert --quiet --load " + b.path().string() +
                                          " --save " + back.path().string() + " --tp 1 --pp 1");
  ASSERT_EQ(from.exit_code, 0) << from.err;
  const auto original = tensors_of(a.path() / "iter_0000002");
  EXPECT_EQ(tensors_of(b.path() / "iter_0000002"), original);  // the same global tensors
  EXPECT_EQ(tensors_of(back.path() / "iter_0000002"), original);
  EXPECT_TRUE(original.contains("optimizer/master/embedding.word_embeddings.weight"));
}

TEST(Checkpoint, ConvertToBf16KeepsTheF32WeightsAsMasters) {
  test_support::TempDir a, b;
  ASSERT_EQ(train(1, "training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const CommandResult r = run_megatron("convert --quiet --load " + a.path().string() + " --save " +
                                       b.path().string() + " --dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto f32 = tensors_of(a.path() / "iter_0000002");
  const auto bf16 = tensors_of(b.path() / "iter_0000002");
  const std::string name = "decoder.layers.3.mlp.linear_fc1.weight";
  EXPECT_EQ(bf16.at("optimizer/master/" + name), f32.at("model/" + name));
  EXPECT_EQ(bf16.at("model/" + name).size() * 2, f32.at("model/" + name).size());
}

TEST(Checkpoint, ConvertedCheckpointContinuesTheRunUnderItsLayout) {
  test_support::TempDir a, b;
  const Training straight = train(1, save_to(a.path(), 5));
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  const CommandResult r = run_megatron("convert --quiet --load " + (a.path() / "iter_0000005").string() +
                                       " --save " + b.path().string() + " --tp 2 --pp 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Training resumed = train(4, "parallel.tensor=2 parallel.pipeline=2 checkpoint.load=" + b.path().string());
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  expect_close(straight.metrics, resumed.metrics, 6);
}

TEST(Checkpoint, ConvertRefusesToOverwriteACheckpoint) {
  test_support::TempDir a;
  ASSERT_EQ(train(1, "training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const std::string before = slurp(a.path() / "iter_0000002" / "rank_00000.h5");
  const CommandResult r = run_megatron("convert --quiet --load " + a.path().string() + " --save " +
                                       a.path().string() + " --tp 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("exists already"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(a.path() / "iter_0000002" / "rank_00000.h5"), before);
}

TEST(Checkpoint, HuggingFaceExportAndImportGiveTheModelBackAndItFineTunes) {
  // vocab 256 needs no padding rows, so every weight comes back whole and bitwise.
  test_support::TempDir a, hf, back;
  ASSERT_EQ(train(1, "training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const CommandResult to = run_megatron("convert --to hf --load " + a.path().string() + " --save " +
                                        (hf.path() / "model").string());
  ASSERT_EQ(to.exit_code, 0) << to.err;
  EXPECT_TRUE(fs::exists(hf.path() / "model" / "config.json"));
  const CommandResult from = run_megatron("convert --quiet --from hf --load " +
                                          (hf.path() / "model").string() + " --save " +
                                          back.path().string() + " --tp 2");
  ASSERT_EQ(from.exit_code, 0) << from.err;
  const auto original = tensors_of(a.path() / "iter_0000002");
  const auto imported = tensors_of(back.path() / "iter_0000000");
  EXPECT_EQ(imported.size(), 0u + std::count_if(original.begin(), original.end(), [](const auto& t) {
              return t.first.rfind("model/", 0) == 0;
            }));
  for (const auto& [name, bytes] : imported) EXPECT_EQ(bytes, original.at(name)) << name;
  // The import's recipe trains from it.
  const CommandResult tune = run_job(
      "run --nproc 2 " + (back.path() / "recipe.yaml").string() + " parallel.tensor=2 checkpoint.load=" +
      back.path().string() + " training.train_iters=2 training.lr_warmup_iters=1 --run-dir " +
      (back.path() / "run").string());
  EXPECT_EQ(tune.exit_code, 0) << tune.err;
  EXPECT_NE(tune.out.find("the optimizer starts fresh"), std::string::npos) << tune.out;
}

TEST(Checkpoint, ConvertRefusesALayoutTheModelCannotTake) {
  test_support::TempDir a, b;
  ASSERT_EQ(train(1, "training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const CommandResult tp = run_megatron("convert --quiet --load " + a.path().string() + " --save " +
                                        b.path().string() + " --tp 3");
  EXPECT_EQ(tp.exit_code, 2) << tp.err;
  EXPECT_NE(tp.err.find("--tp 3: the model's model.num_attention_heads (4) is not divisible by it"),
            std::string::npos) << tp.err;
  const CommandResult hf = run_megatron("convert --to hf --load " + a.path().string() + " --save " +
                                        b.path().string() + " --tp 2");
  EXPECT_EQ(hf.exit_code, 2) << hf.err;
  EXPECT_NE(hf.err.find("drop --tp and --pp"), std::string::npos) << hf.err;
  EXPECT_FALSE(fs::exists(b.path() / "latest"));
}

TEST(Checkpoint, InspectShowsIterationLayoutModelAndTensors) {
  test_support::TempDir a;
  ASSERT_EQ(train(2, "parallel.tensor=2 training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const CommandResult r = run_megatron("ckpt inspect " + a.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("iteration 2, 16 samples consumed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved under tensor 2 x pipeline 1 x data 1 (2 ranks)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.num_layers: 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model/embedding.word_embeddings.weight [256, 32] f32 (split rows)"),
            std::string::npos) << r.out;
  const CommandResult recipe = run_megatron("ckpt inspect --recipe " + a.path().string());
  EXPECT_NE(recipe.out.find("num_layers: 8"), std::string::npos) << recipe.out;
}

TEST(Checkpoint, H5pyReadsAWholeTensorOfAShardedCheckpoint) {
  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "h5py is not installed (scripts/install-deps.sh --test installs python3-h5py)";
  }
  test_support::TempDir a;
  ASSERT_EQ(train(2, "parallel.tensor=2 training.train_iters=2" + save_to(a.path(), 2)).result.exit_code, 0);
  const fs::path dir = a.path() / "iter_0000002";
  // h5py sees the global [ffn x 2 ... ] tensor whole; compare with what megatron reads.
  const auto mine = tensors_of(dir);
  const std::vector<std::byte>& fc1 = mine.at("model/decoder.layers.0.mlp.linear_fc1.weight");
  const fs::path out = a.path() / "fc1.f32";
  const std::string script =
      "import h5py, numpy as np\n"
      "f = h5py.File('" + (dir / "checkpoint.h5").string() + "', 'r')\n"
      "w = f['model/decoder.layers.0.mlp.linear_fc1.weight'][...]\n"
      "assert w.shape == (128, 32), w.shape\n"
      "assert f.attrs['iteration'] == 2\n"
      "w.astype('<f4').tofile('" + out.string() + "')\n";
  const fs::path py = a.write("read.py", script);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + py.string()).c_str()), 0);
  const std::string got = slurp(out);
  ASSERT_EQ(got.size(), fc1.size());
  EXPECT_EQ(std::memcmp(got.data(), fc1.data(), fc1.size()), 0);
}

}  // namespace checkpoint_test
}  // namespace megatron::cli
