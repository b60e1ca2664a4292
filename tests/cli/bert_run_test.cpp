// `megatron run` for BERT: both losses fall on real sentence-split data; every parallel layout
// trains the same model as one process (dropout off and on); a resumed run is bitwise the
// straight run; a checkpoint continues under another layout and converts there and back; bad
// BERT input is one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ckpt/checkpoint_reader.hpp"
#include "cli/run_command.hpp"
#include "cli/checkpoint_tensors.hpp"
#include "cli/layout_runs.hpp"
#include "cli/tiny_bert.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace bert_run_test {

namespace fs = std::filesystem;

Training train(int nproc, const std::string& overrides) {
  return train_model(bert_model(), nproc, overrides);
}

const std::vector<Iteration>& reference(const std::string& overrides) {
  return reference_run(bert_model(), overrides);
}

TEST(BertRun, BothLossesAreLoggedAndFall) {
  test_support::TempDir dir;
  const CommandResult r = run_job(
      "run --threads 2 " + bert_model() +
      "model.num_layers=2 model.hidden_size=64 training.train_iters=60 training.lr=2e-3 "
      "training.global_batch_size=16 training.micro_batch_size=8 eval.interval=60 "
      "eval.iters=2 --run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("lm loss:"), std::string::npos);
  EXPECT_NE(r.out.find("sop loss:"), std::string::npos);
  EXPECT_NE(r.out.find("sop loss value:"), std::string::npos) << "validation reports it too";
  const std::vector<Iteration> m = read_metrics(dir.path());
  ASSERT_EQ(m.size(), 60u);
  const auto mean = [&](size_t from, double Iteration::*field) {
    double sum = 0.0;
    for (size_t i = from; i < from + 10; ++i) sum += m[i].*field;
    return sum / 10.0;
  };
  // Untrained, the LM loss is about log(30522) = 10.3 and the sentence-order loss log 2 = 0.69.
  EXPECT_GT(mean(0, &Iteration::loss), 9.0);
  EXPECT_LT(mean(50, &Iteration::loss), mean(0, &Iteration::loss) - 2.0);
  EXPECT_LT(mean(50, &Iteration::sop_loss), mean(0, &Iteration::sop_loss));
}

struct Layout {
  const char* name;
  int nproc;
  const char* overrides;
};

class BertParallelRun : public ::testing::TestWithParam<Layout> {};

TEST_P(BertParallelRun, MatchesOneProcessStepForStep) {
  const Training many = train(GetParam().nproc, GetParam().overrides);
  ASSERT_EQ(many.result.exit_code, 0) << many.result.err;
  expect_same_run(reference(""), many.metrics, kF32Tolerance);
}

TEST_P(BertParallelRun, MatchesOneProcessStepForStepWithDropout) {
  const Training many = train(GetParam().nproc, kDropout + GetParam().overrides);
  ASSERT_EQ(many.result.exit_code, 0) << many.result.err;
  expect_same_run(reference(kDropout), many.metrics, kF32Tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, BertParallelRun,
    ::testing::Values(
        Layout{"tp2_sp", 2, "parallel.tensor=2 parallel.sequence_parallel=true"},
        Layout{"tp2", 2, "parallel.tensor=2"},
        Layout{"pp2", 2, "parallel.pipeline=2"},
        Layout{"pp4_interleaved", 4, "parallel.pipeline=4 parallel.virtual_pipeline=2"},
        Layout{"dp2_distributed_optimizer", 2, "parallel.distributed_optimizer=true"},
        Layout{"tp2_pp2_dp2_sp_distributed_optimizer", 8,
               "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BertCheckpoint, ResumedRunIsBitwiseTheStraightRun) { expect_bitwise_resume(bert_model()); }

TEST(BertCheckpoint, SavedShardedContinuesInOneProcessAndConvertsThereAndBack) {
  test_support::TempDir save, one, back;
  const Training sharded =
      train(8, "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true" + save_to(save.path()));
  ASSERT_EQ(sharded.result.exit_code, 0) << sharded.result.err;
  const Training resumed =
      train(1, " checkpoint.load=" + (save.path() / "iter_0000005").string());
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  expect_same_run(reference(""), resumed.metrics, kF32Tolerance, 6);

  const CommandResult to = run_megatron("convert --quiet --load " + save.path().string() +
                                        " --save " + one.path().string() + " --tp 1 --pp 1");
  ASSERT_EQ(to.exit_code, 0) << to.err;
  const CommandResult from = run_megatron("convert --quiet --load " + one.path().string() +
                                          " --save " + back.path().string() + " --tp 2 --pp 2");
  ASSERT_EQ(from.exit_code, 0) << from.err;
  const Training continued =
      train(1, " checkpoint.load=" + (one.path() / "iter_0000010").string() +
                   " training.train_iters=12");
  ASSERT_EQ(continued.result.exit_code, 0) << continued.result.err;
  EXPECT_EQ(continued.metrics.size(), 2u);
}

TEST(BertCheckpoint, HuggingFaceExportAndImportGiveTheModelBackAndItTrains) {
  test_support::TempDir a, hf, back;
  const Training run = train(1, "training.train_iters=2 checkpoint.save=" + a.path().string());
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  // The vocabulary's padding rows (30,524 real of 30,720: 256 x tensor 1 here, 128 x tensor 2 for
  // the import) stay behind in Hugging Face.
  expect_hugging_face_round_trip(a.path(), hf.path(), back.path(),
                                 "MegatronBertForPreTraining",
                                 {"embedding.word_embeddings.weight", "output_layer.bias"}, 30524, 30720);
  const CommandResult tune = run_job(
      "run --nproc 2 " + (back.path() / "recipe.yaml").string() + " parallel.tensor=2 " +
      "checkpoint.load=" + back.path().string() + " data.prefixes=[" + bert_dataset() +
      "] data.vocab_file=" + kBertVocab + " data.seq_length=32 data.split=100,0,0 " +
      "training.train_iters=2 " +
      "training.lr_warmup_iters=1 --run-dir " + (back.path() / "run").string());
  EXPECT_EQ(tune.exit_code, 0) << tune.err;
}

TEST(BertBadInput, DataWithoutSentenceSplittingIsOneLineNamingTheFix) {
  test_support::TempDir dir;
  const std::string corpus = dir.write("one.jsonl", "{\"text\": \"Only one sentence here.\"}\n"
                                                    "{\"text\": \"And one more here.\"}\n").string();
  const CommandResult pre = run_megatron(
      "preprocess --quiet --input " + corpus + " --output-prefix " +
      (dir.path() / "docs").string() + " --tokenizer bert-wordpiece-lowercase --vocab-file " +
      kBertVocab);
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  const CommandResult r = run_megatron(
      "run --threads 1 " + bert_model() + "data.prefixes=[" + (dir.path() / "docs_text_document").string() +
      "] --run-dir " + (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--split-sentences"), std::string::npos) << r.err;
}

TEST(BertBadInput, AVocabularyWithoutBertTokensIsRefusedNamingIt) {
  test_support::TempDir dir;
  const std::string vocab = dir.write("vocab.txt", "[PAD]\n[UNK]\nthe\n##s\n").string();
  const CommandResult r = run_megatron("run --threads 1 " + bert_model() + "data.vocab_file=" +
                                       vocab + " --run-dir " + (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("[CLS]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(vocab), std::string::npos) << r.err;
}

TEST(BertBadInput, ATokenizerOtherThanWordPieceIsRefusedNamingTheKey) {
  test_support::TempDir dir;
  const CommandResult r = run_megatron("run --threads 1 " + bert_model() +
                                       "data.tokenizer=gpt2-bpe --run-dir " + (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.tokenizer: BERT data is made with a WordPiece vocab.txt"), std::string::npos)
      << r.err;
}

}  // namespace bert_run_test
}  // namespace megatron::cli
