// logging.tensorboard_dir: a run writes one event file with Megatron's tags, read back by
// tensorboard's own reader where the package is installed, else by an independent decoder
// (tests/cli/read_tfevents.py, every CRC checked); its losses are the metrics.jsonl losses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace tensorboard_test {

TEST(TensorBoard, ARunWritesMegatronsTagsWithTheLoggedLossesAndTheRecipe) {
  test_support::TempDir dir;
  const auto run_dir = dir.path() / "run", board = dir.path() / "board";
  const CommandResult r = run_megatron(
      "run recipes/gpt-tiny.yaml model.num_layers=1 model.vocab_size=256 data.seq_length=32 "
      "training.micro_batch_size=4 training.global_batch_size=8 training.train_iters=4 "
      "training.lr_warmup_iters=1 logging.interval=1 eval.interval=2 eval.iters=1 --threads 1 "
      "logging.tensorboard_dir=" +
      board.string() + " --run-dir " + run_dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string reader = std::string(MEGATRON_SOURCE_DIR) + "/tests/cli/read_tfevents.py";
  const auto out = dir.path() / "events.json";
  ASSERT_EQ(std::system(("python3 " + reader + " " + board.string() + " > " + out.string()).c_str()), 0);
  const auto j = nlohmann::json::parse(slurp(out));
  const auto& s = j["scalars"];
  for (const char* tag : {"lm loss", "lm loss vs samples", "learning-rate", "batch-size", "loss-scale",
                          "grad-norm", "iteration-time", "throughput", "lm loss validation",
                          "lm loss validation ppl"}) {
    EXPECT_TRUE(s.contains(tag)) << tag << " in " << j.dump();
  }
  const std::vector<Iteration> logged = read_metrics(run_dir);
  ASSERT_EQ(logged.size(), 4u);
  ASSERT_EQ(s["lm loss"].size(), 4u);
  for (size_t i = 0; i < logged.size(); ++i) {
    EXPECT_EQ(s["lm loss"][i][0].get<int64_t>(), int64_t(i + 1));
    // TensorBoard's simple_value is a float: the logged double rounded to f32.
    EXPECT_EQ(s["lm loss"][i][1].get<double>(), double(float(logged[i].loss)));
    EXPECT_EQ(s["lm loss vs samples"][i][0].get<int64_t>(), int64_t(i + 1) * 8);  // the global batch
  }
  EXPECT_EQ(s["lm loss validation"].size(), 3u);  // before training, at 2 and at 4
  EXPECT_NE(j["text"]["recipe"].get<std::string>().find("num_layers: 1"), std::string::npos);
}

}  // namespace tensorboard_test
}  // namespace megatron::cli
