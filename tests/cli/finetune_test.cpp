// Classification fine-tuning from the command line: a run with finetune.train_data starts from a
// pre-trained checkpoint, trains the classifier (its loss falls on separable text), validates
// with accuracy, and refuses recipes that cannot mean what they say.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"
#include "cli/tiny_job.hpp"

namespace megatron::cli {
namespace finetune_test {

using ::testing::HasSubstr;

const std::string kTokenizer = std::string(" data.vocab_file=") + MEGATRON_SOURCE_DIR +
                               "/data/tokenizers/gpt2/vocab.json data.merge_file=" + MEGATRON_SOURCE_DIR +
                               "/data/tokenizers/gpt2/merges.txt ";
const std::string kSmall = "recipes/gpt-tiny.yaml model.num_layers=1 data.seq_length=32 --threads 1 ";

// Reviews whose class a single word decides.
std::string reviews(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const bool good = i % 3 != 0;
    out += std::string("{\"text\": \"item ") + std::to_string(i) + (good ? " was wonderful" : " was awful") +
           "\", \"label\": \"" + (good ? "great" : "other") + "\"}\n";
  }
  return out;
}

std::vector<nlohmann::json> lines_of(const std::filesystem::path& file) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(file));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Finetune, AClassifierTrainsFromAPretrainedCheckpointAndReportsAccuracy) {
  test_support::TempDir dir;
  const auto pre = dir.path() / "pre";
  ASSERT_EQ(run_megatron("run " + kSmall + "training.train_iters=2 training.lr_warmup_iters=1 "
                         "eval.interval=null checkpoint.save=" + pre.string() + " --run-dir " +
                         (dir.path() / "prerun").string()).exit_code, 0);
  const std::string train = dir.write("train.jsonl", reviews(96)).string();
  const std::string valid = dir.write("valid.jsonl", reviews(32)).string();
  const auto run_dir = dir.path() / "ft";
  const CommandResult r = run_megatron(
      "run " + kSmall + kTokenizer + "data.mock=false finetune.train_data=" + train +
      " finetune.valid_data=" + valid + " 'finetune.labels=[great, other]' finetune.pretrained=" +
      pre.string() + " training.train_iters=24 training.lr_warmup_iters=2 training.lr=1e-3 "
      "logging.interval=1 eval.interval=12 eval.iters=1 checkpoint.save=" + (dir.path() / "clf").string() +
      " --run-dir " + run_dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fine-tuning from " + (pre / "iter_0000002").string()));
  EXPECT_THAT(r.out, HasSubstr("drawn fresh: classification_head.weight, classification_head.bias"));
  EXPECT_THAT(r.out, HasSubstr("classification loss: "));
  std::vector<double> loss;
  std::optional<double> accuracy;
  for (const auto& m : lines_of(run_dir / "metrics.jsonl")) {
    ASSERT_FALSE(m.contains("lm_loss")) << m.dump();
    loss.push_back(m["classification_loss"].get<double>());
    if (m.contains("val_accuracy")) accuracy = m["val_accuracy"].get<double>();
  }
  ASSERT_EQ(loss.size(), 24u);
  // One word separates the classes: the classifier learns it (the first loss is about log 2).
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  ASSERT_TRUE(accuracy.has_value());
  EXPECT_GE(*accuracy, 0.0);
  EXPECT_LE(*accuracy, 1.0);

  // megatron eval scores the fine-tuned checkpoint (its recipe names the tokenizer files), the
  // same on one process and on two.
  std::map<std::string, double> scores[2];
  for (int procs = 1; procs <= 2; ++procs) {
    const auto json = dir.path() / ("eval" + std::to_string(procs) + ".json");
    const CommandResult e = run_job("eval " + (dir.path() / "clf").string() + " --task classification --data " +
                                         valid + " --batch-size 5 --json " + json.string() +
                                         (procs == 2 ? " --nproc 2" : " --threads 1"));
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const auto results = nlohmann::json::parse(slurp(json));
    for (const auto& [k, v] : results["results"]["classification"].items()) {
      if (v.is_number()) scores[procs - 1][k] = v.get<double>();
    }
  }
  ASSERT_TRUE(scores[0].contains("acc,none"));
  ASSERT_TRUE(scores[0].contains("f1,none"));
  ASSERT_TRUE(scores[0].contains("f1_other,none"));
  EXPECT_EQ(scores[0], scores[1]);
  // A language-model task on a classifier is refused with what to do instead.
  const CommandResult lm = run_megatron("eval " + (dir.path() / "clf").string() + " --task perplexity --data " + valid);
  EXPECT_EQ(lm.exit_code, 2);
  EXPECT_THAT(lm.err, HasSubstr("is a fine-tuned classifier: score it with --task classification"));
}

TEST(Finetune, RecipesThatCannotMeanWhatTheySayAreRefused) {
  test_support::TempDir dir;
  const std::string train = dir.write("train.jsonl", reviews(8)).string();
  const std::string base = "run " + kSmall + kTokenizer + "finetune.train_data=" + train + " --run-dir " +
                           (dir.path() / "r").string() + " ";
  const CommandResult no_labels = run_megatron(base + "data.mock=false");
  EXPECT_EQ(no_labels.exit_code, 2);
  EXPECT_THAT(no_labels.err, HasSubstr("jsonl fine-tuning needs finetune.labels"));
  const CommandResult with_mock = run_megatron(base + "'finetune.labels=[great, other]'");
  EXPECT_EQ(with_mock.exit_code, 2);
  EXPECT_THAT(with_mock.err, HasSubstr("fine-tuning reads finetune.train_data: remove data.prefixes"));
  const CommandResult unknown = run_megatron(base + "data.mock=false 'finetune.labels=[great, bad]'");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr(train + ":1: field \"label\" = \"other\" is not one of the classes great, bad"));
  const CommandResult stray = run_megatron("run " + kSmall + "finetune.pretrained=x --run-dir " +
                                           (dir.path() / "s").string());
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_THAT(stray.err, HasSubstr("finetune.pretrained belongs to fine-tuning"));
}

}  // namespace finetune_test
}  // namespace megatron::cli
