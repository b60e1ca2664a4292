// `megatron run` as a user runs it: the run directory, the log, stop conditions and errors.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace run_cli_test {

// gpt-tiny shrunk so a run takes a second or two, even under the sanitizers. One thread unless
// a test is about threads: ctest runs tests side by side, and two runs of two threads each on
// two cores spend their time waiting for each other.
const std::string kSmall =
    "--threads 1 recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=32 model.num_attention_heads=2 "
    "model.vocab_size=96 data.seq_length=16 training.micro_batch_size=2 "
    "training.global_batch_size=4 training.lr_warmup_iters=1 ";

std::vector<nlohmann::json> metrics(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(RunCommand, TheResolvedRecipeNamesThePlansPlacementAmongItsDerivedValues) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall + "training.train_iters=2 --run-dir " +
                              dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir.path() / "recipe.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("#   world size: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("#   data-parallel size: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("#   micro-batches per iteration:"), std::string::npos) << text;
}

TEST(RunCommand, WritesTheResolvedRecipeAndOneMetricsLinePerLoggedIteration) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall +
                              "training.train_iters=6 logging.interval=2 eval.interval=3 "
                              "eval.iters=1 --run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "recipe.yaml"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "recipe.original.yaml"));
  const auto lines = metrics(dir.path());
  std::vector<int> iterations;
  for (const auto& m : lines) {
    iterations.push_back(m["iteration"].get<int>());
    for (const char* key : {"lm_loss", "lr", "grad_norm", "tokens_per_s", "consumed_samples",
                            "loss_scale", "skipped_iterations", "nan_iterations", "ms_per_iteration"}) {
      EXPECT_TRUE(m.contains(key)) << key << " missing from " << m.dump();
    }
    const bool evaluated = m["iteration"] == 3 || m["iteration"] == 6;
    EXPECT_EQ(m.contains("val_loss"), evaluated) << m.dump();
  }
  EXPECT_EQ(iterations, (std::vector<int>{2, 3, 4, 6}));
  EXPECT_EQ(lines.back()["consumed_samples"], 24);
  EXPECT_NE(r.out.find("validation loss at iteration 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" iteration       6/      6 | consumed samples:"), std::string::npos)
      << r.out;
}

std::vector<double> losses(const std::string& args, int threads = 1) {
  test_support::TempDir dir;
  std::string command = "run " + kSmall + args + " logging.interval=1 --run-dir " +
                        dir.path().string();
  if (threads != 1) command.replace(command.find("--threads 1"), 11, "--threads " + std::to_string(threads));
  const auto r = run_megatron(command);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> out;
  for (const auto& m : metrics(dir.path())) out.push_back(m["lm_loss"].get<double>());
  return out;
}

TEST(RunCommand, TheSameSeedGivesBitwiseTheSameLossesOnOneAndTwoThreads) {
  const std::string args = "training.train_iters=4 model.hidden_dropout=0.1 "
                           "model.attention_dropout=0.1";
  const auto one = losses(args);
  const auto two = losses(args, 2);
  ASSERT_EQ(one.size(), 4u);
  EXPECT_EQ(one, two);
}

TEST(RunCommand, DataWorkersChangeWhereBatchesAreBuiltNotTheLosses) {
  const std::string args = "training.train_iters=6 training.micro_batch_size=1 ";
  const auto inline_loading = losses(args + "data.num_workers=0");
  ASSERT_EQ(inline_loading.size(), 6u);
  EXPECT_EQ(losses(args + "data.num_workers=3"), inline_loading);
}

TEST(RunCommand, ADifferentSeedGivesDifferentLosses) {
  EXPECT_NE(losses("training.train_iters=2"), losses("training.train_iters=2 training.seed=7"));
}

TEST(RunCommand, TrainingOnMockDataLowersTheLoss) {
  const auto l = losses("training.train_iters=40 training.lr=1e-2");
  ASSERT_EQ(l.size(), 40u);
  EXPECT_LT(l.back(), l.front() - 1.0) << "first " << l.front() << ", last " << l.back();
}

// bf16 keeps 8 significant bits, f16 11: weights and activations round at 0.4% and 0.05%
// relative, and the masters, gradients and loss stay f32. Over 30 steps the curves differ by a
// few 1e-3 nats (measured: at most 0.003); 0.05 nats, 1% of the loss, still fails for any real
// mistake (a missing unscale, a master weight not refreshed), which moves it by far more.
void expect_tracks_f32(const std::string& dtype) {
  const std::string args = "training.train_iters=30 training.lr=1e-2 precision.initial_loss_scale=4096 ";
  const auto reference = losses(args + "precision.dtype=f32");
  const auto other = losses(args + "precision.dtype=" + dtype);
  ASSERT_EQ(reference.size(), 30u);
  ASSERT_EQ(other.size(), 30u);
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_NEAR(other[i], reference[i], 0.05) << dtype << " at iteration " << i + 1;
  }
  EXPECT_NE(other, reference) << "the " << dtype << " run must really round";
}

TEST(RunCommand, Bf16TracksTheF32LossCurve) { expect_tracks_f32("bf16"); }

TEST(RunCommand, F16WithLossScalingTracksTheF32LossCurve) { expect_tracks_f32("f16"); }

TEST(RunCommand, F16FromTheDefaultScaleSkipsOverflowingStepsThenTrains) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall + "training.train_iters=40 training.lr=1e-2 "
                              "precision.dtype=f16 logging.interval=40 --run-dir " +
                              dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto last = metrics(dir.path()).back();
  // From 2^32, an f16 gradient overflows until the scale has halved below about 2^20.
  EXPECT_GT(last["skipped_iterations"].get<int>(), 5);
  EXPECT_LT(last["loss_scale"].get<double>(), 4294967296.0);
  EXPECT_LT(last["lm_loss"].get<double>(), 4.5);
}

// The quickstart's promise on a slice of the bundled corpus: an untrained model scores about
// log(50304) = 10.8 nats; 40 small steps must take validation below 8 (measured: about 6.9).
// The first 25 documents of the bundled corpus, GPT-2 tokenized into `dir`; returns the prefix.
std::string austen_slice(const test_support::TempDir& dir) {
  {
    std::ifstream corpus(std::string(MEGATRON_SOURCE_DIR) + "/data/corpora/austen.jsonl");
    std::ofstream slice(dir.path() / "austen.jsonl");
    std::string line;
    for (int i = 0; i < 25 && std::getline(corpus, line); ++i) slice << line << "\n";
  }
  const std::string prefix = (dir.path() / "austen").string();
  const auto pre = run_megatron(
      "preprocess --input " + prefix + ".jsonl --output-prefix " + prefix +
      " --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json --merge-file "
      "data/tokenizers/gpt2/merges.txt --append-eod --workers 1");
  EXPECT_EQ(pre.exit_code, 0) << pre.err;
  return prefix + "_text_document";
}

TEST(RunCommand, TrainingOnTheBundledCorpusLowersTheValidationLossSubstantially) {
  test_support::TempDir dir;
  const std::string prefix = austen_slice(dir);
  const auto r = run_megatron(
      "run --threads 1 recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=64 "
      "model.num_attention_heads=2 data.seq_length=64 training.micro_batch_size=4 "
      "training.global_batch_size=4 training.lr_warmup_iters=5 training.train_iters=40 "
      "training.lr=5e-3 logging.interval=20 eval.interval=40 eval.iters=2 data.mock=false "
      "'data.prefixes=[" + prefix + "]' --run-dir " + (dir.path() / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("validation loss at iteration 0 | lm loss value: 1.0"), std::string::npos)
      << r.out;
  const auto last = metrics(dir.path() / "run").back();
  EXPECT_LT(last["val_loss"].get<double>(), 8.0) << r.out;
}

TEST(RunCommand, TrainSamplesSetsTheLengthInGlobalBatches) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall + "training.train_iters=null training.train_samples=10 "
                              "logging.interval=1 --run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = metrics(dir.path());
  ASSERT_EQ(lines.size(), 3u);  // 10 samples in batches of 4, rounded up
  EXPECT_EQ(lines.back()["consumed_samples"], 12);
}

TEST(RunCommand, TheBatchRampsUpAsMegatronsRampupBatchSize) {
  test_support::TempDir dir;
  // From 2 to 4 in one increment over 4 samples: batches 2, 2, then 4.
  const auto r = run_megatron("run " + kSmall + "training.train_iters=4 "
                              "'training.rampup_batch_size=[2, 2, 4]' logging.interval=1 "
                              "--run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int> batches;
  for (const auto& m : metrics(dir.path())) batches.push_back(m["global_batch_size"].get<int>());
  EXPECT_EQ(batches, (std::vector<int>{2, 2, 4, 4}));
}

TEST(RunCommand, ADatasetWithIdsBeyondTheVocabularyIsRefusedWithExitCodeTwo) {
  test_support::TempDir dir;
  const std::string prefix = austen_slice(dir);
  // GPT-2 ids run to 50256; a model told its vocabulary has 96 entries cannot embed them.
  const auto r = run_megatron("run " + kSmall + "training.train_iters=2 data.mock=false "
                              "'data.prefixes=[" + prefix + "]' --run-dir " +
                              (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  // The whole dataset is checked as it opens, before any step.
  EXPECT_NE(r.err.find("sequence 0 holds token id "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("outside the model's vocabulary of 96 ids"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run" / "metrics.jsonl"));
}

TEST(RunCommand, ARunRefusedBeforeItsFirstStepLeavesNoRunDirectoryItMadeAndNoRecipeBehind) {
  test_support::TempDir dir;
  const std::string refused = "run " + kSmall + "training.train_iters=2 data.mock=false "
                              "'data.prefixes=[" + (dir.path() / "missing").string() + "]' --run-dir ";
  const std::filesystem::path fresh = dir.path() / "new" / "run";
  const auto r = run_megatron(refused + fresh.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "new")) << "the directories it made are gone";
  // An earlier run's directory keeps its recipe as that run wrote it.
  const std::filesystem::path earlier = dir.path() / "earlier";
  ASSERT_EQ(run_megatron("run " + kSmall + "training.train_iters=1 --run-dir " + earlier.string()).exit_code, 0);
  const std::string recipe = slurp(earlier / "recipe.yaml");
  EXPECT_EQ(run_megatron(refused + earlier.string() + " --force").exit_code, 2);
  EXPECT_EQ(slurp(earlier / "recipe.yaml"), recipe);
}

TEST(RunCommand, ANonFiniteLossStopsTheRunNamingTheIteration) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall +
                              "training.train_iters=20 training.lr=1e30 training.clip_grad=0 "
                              "--run-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("megatron: error: iteration "), std::string::npos) << r.err;
}

TEST(RunCommand, ATimeLimitStopsTheRunEarly) {
  test_support::TempDir dir;
  const auto r = run_megatron("run " + kSmall + "training.train_iters=100000 --time-limit 0.0001 "
                              "--run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = metrics(dir.path());
  ASSERT_FALSE(lines.empty());
  EXPECT_LT(lines.back()["iteration"].get<int>(), 100000);
  EXPECT_NE(r.out.find("time limit"), std::string::npos) << r.out;
}

TEST(RunCommand, ABadOverrideIsRefusedWithOneLineAndExitCodeTwo) {
  const auto r = run_megatron("run recipes/gpt-tiny.yaml training.lr=-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("megatron: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(RunCommand, OneProcessWhoseLayoutNeedsSeveralRanksIsToldToStartThem) {
  const auto r = run_megatron("run recipes/gpt-tiny.yaml parallel.tensor=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("megatron: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("needs 2 ranks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--nproc 2"), std::string::npos) << r.err;
}

TEST(RunCommand, ARunDirectoryOfAnEarlierRunIsRefusedUnlessForced) {
  test_support::TempDir dir;
  const std::string args = "run " + kSmall + "training.train_iters=2 logging.interval=1 --run-dir " +
                           dir.path().string();
  ASSERT_EQ(run_megatron(args).exit_code, 0);
  const auto again = run_megatron(args);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("already holds an earlier run's metrics"), std::string::npos) << again.err;
  EXPECT_EQ(metrics(dir.path()).size(), 2u);  // untouched
  const auto forced = run_megatron(args + " --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(metrics(dir.path()).size(), 4u);  // appended
}

TEST(RunCommand, ARunThatResumesWritesIntoItsOwnRunDirectory) {
  test_support::TempDir dir;
  const std::string args = "run " + kSmall + "logging.interval=1 checkpoint.save=" +
                           (dir.path() / "ckpt").string() + " --run-dir " + (dir.path() / "run").string();
  ASSERT_EQ(run_megatron(args + " training.train_iters=2").exit_code, 0);
  const auto resumed = run_megatron(args + " training.train_iters=3");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(metrics(dir.path() / "run").size(), 3u);
}

}  // namespace run_cli_test
}  // namespace megatron::cli
