// How `megatron run` answers stop signals: one asks for a stop at the next iteration boundary
// (after a checkpoint), a second one ends the run at once, whatever it is doing.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace stop_signal_test {

struct Stopped {
  int exit_code = -1;
  std::string log;  // stdout and stderr
  double seconds_after_last_signal = 0;
};

// Starts `args` in the background, waits until its output shows `ready` (a regex for grep -E),
// then sends each signal of `signals` 0.3 s apart and times how long the run takes to end
// after the last one.
Stopped signal_run(const std::string& args, const std::string& ready, const std::vector<std::string>& signals) {
  test_support::TempDir dir;
  const auto log = dir.path() / "log";
  // set -m: a background job of a script without job control starts with SIGINT ignored.
  std::string script = "set -m\ncd '" + std::string(MEGATRON_SOURCE_DIR) + "'\n'" + MEGATRON_BINARY +
                       "' " + args + " >'" + log.string() + "' 2>&1 &\npid=$!\n"
                       "for i in $(seq 1 1200); do\n"
                       "  grep -Eq '" + ready + "' '" + log.string() + "' && break\n"
                       "  kill -0 $pid 2>/dev/null || break\n"
                       "  sleep 0.1\n"
                       "done\n"
                       "sleep 0.5\n";
  for (const std::string& s : signals) script += "kill -" + s + " $pid\nsleep 0.3\n";
  script += "start=$(date +%s%N)\nwait $pid\nstatus=$?\nend=$(date +%s%N)\n"
            "echo $status >'" + (dir.path() / "status").string() + "'\n"
            "echo $(( (end - start) / 1000000 )) >'" + (dir.path() / "ms").string() + "'\n";
  std::system(("bash " + dir.write("signal.sh", script).string()).c_str());
  Stopped out;
  out.log = slurp(log);
  const std::string status = slurp(dir.path() / "status");
  if (!status.empty()) out.exit_code = std::stoi(status);
  const std::string ms = slurp(dir.path() / "ms");
  if (!ms.empty()) out.seconds_after_last_signal = std::stod(ms) / 1000.0;
  return out;
}

// One iteration of this model takes many seconds on a CPU (32 micro-batches of 2,048 tokens),
// so a stop at the boundary is far away; it needs little memory (a small vocabulary).
const std::string kSlowIterations =
    "run --threads 1 recipes/gpt-tiny.yaml model.num_layers=4 model.hidden_size=256 "
    "model.num_attention_heads=4 model.vocab_size=1000 data.seq_length=512 "
    "training.micro_batch_size=4 training.global_batch_size=128 training.train_iters=100 "
    "eval.interval=100000 ";

TEST(StopSignal, ASecondSigtermEndsARunInTheMiddleOfAnIteration) {
  test_support::TempDir run_dir;
  const Stopped r = signal_run(kSlowIterations + "--run-dir " + run_dir.path().string(),
                               "data: ", {"TERM", "TERM"});
  EXPECT_EQ(r.exit_code, 128 + 15) << r.log;
  EXPECT_NE(r.log.find("megatron: error: rank 0: a second SIGTERM before the iteration boundary"),
            std::string::npos) << r.log;
  // The process ends when it gets the signal, not at the boundary minutes away (the 0.3 s the
  // script waited after sending it is part of the time it measured from).
  EXPECT_LT(r.seconds_after_last_signal, 5.0) << r.log;
}

TEST(StopSignal, ASecondCtrlCEndsARunInTheMiddleOfAnIteration) {
  test_support::TempDir run_dir;
  const Stopped r = signal_run(kSlowIterations + "--run-dir " + run_dir.path().string(),
                               "data: ", {"INT", "INT"});
  EXPECT_EQ(r.exit_code, 128 + 2) << r.log;
  EXPECT_NE(r.log.find("a second SIGINT"), std::string::npos) << r.log;
  EXPECT_LT(r.seconds_after_last_signal, 5.0) << r.log;
}

TEST(StopSignal, OneCtrlCStopsAtTheIterationBoundaryAndExitsZero) {
  test_support::TempDir run_dir;
  const Stopped r = signal_run(
      "run --threads 1 recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=32 "
      "model.num_attention_heads=2 model.vocab_size=96 data.seq_length=16 "
      "training.micro_batch_size=2 training.global_batch_size=4 training.train_iters=100000 "
      "eval.interval=100000 logging.interval=1 --run-dir " + run_dir.path().string(),
      "iteration +3/", {"INT"});
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("stopped by SIGINT"), std::string::npos) << r.log;
}

// A long run of a tiny model on mock data, stopped by SIGUSR1 after 3 iterations.
Stopped usr1_run(const std::string& extra) {
  test_support::TempDir run_dir;
  return signal_run(
      "run --threads 1 recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=32 "
      "model.num_attention_heads=2 model.vocab_size=96 data.seq_length=16 data.mock=true "
      "training.micro_batch_size=2 training.global_batch_size=4 training.train_iters=100000 "
      "eval.interval=100000 logging.interval=1 --stopped-exit-code 75 --run-dir " +
          run_dir.path().string() + " " + extra,
      "iteration +3/", {"USR1"});
}

TEST(StopSignal, AnEarlyStopWithACheckpointExitsWithTheStoppedExitCode) {
  test_support::TempDir ckpt;
  const Stopped r = usr1_run("checkpoint.save=" + ckpt.path().string());
  EXPECT_EQ(r.exit_code, 75) << r.log;
  EXPECT_NE(r.log.find("stopped by SIGUSR1 after saving a checkpoint"), std::string::npos) << r.log;
}

TEST(StopSignal, AnEarlyStopWithoutACheckpointExitsZeroWhateverTheStoppedExitCode) {
  // Nothing to resume from: a requeue would start over, so the code does not ask for one.
  const Stopped r = usr1_run("");
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("stopped by SIGUSR1"), std::string::npos) << r.log;
}

}  // namespace stop_signal_test
}  // namespace megatron::cli
