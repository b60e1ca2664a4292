// `megatron run` for T5: the loss falls on real span-corrupted data; tensor (with sequence) and
// data parallelism (with the distributed optimizer) train the same model as one process; a
// resumed run is bitwise the straight run; a tensor-parallel checkpoint continues in one
// process after `convert`; what does not train yet is one clear line.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "cli/checkpoint_tensors.hpp"
#include "cli/layout_runs.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_bert.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace t5_run_test {

// t5-tiny shrunk to width 32 with 4 heads; 32 encoder and 12 decoder tokens (at most 4 of the
// 30 target tokens are masked: 1 + 2 x 4 decoder positions); the vocabulary padded to 30,720
// rows at tensor 1 and 2 alike.
std::string t5_model() {
  return "recipes/t5-tiny.yaml model.hidden_size=32 model.num_attention_heads=4 "
         "model.ffn_hidden_size=64 model.make_vocab_size_divisible_by=256 data.seq_length=32 "
         "data.decoder_seq_length=12 data.prefixes=[" + bert_dataset() + "] data.vocab_file=" +
         kBertVocab + " training.micro_batch_size=2 training.global_batch_size=8 "
         "training.lr_warmup_fraction=0.1 training.train_iters=10 logging.interval=1 "
         "eval.interval=5 eval.iters=1 parallel.timeout_minutes=2 parallel.ddp_bucket_size=5000 ";
}

Training train(int nproc, const std::string& overrides) { return train_model(t5_model(), nproc, overrides); }

const std::vector<Iteration>& reference(const std::string& overrides) {
  return reference_run(t5_model(), overrides);
}

TEST(T5Run, TheLossFallsOnSpanCorruptedSentences) {
  test_support::TempDir dir;
  const CommandResult r = run_job(
      "run --threads 2 " + t5_model() +
      "model.hidden_size=64 training.train_iters=40 training.lr=2e-3 training.global_batch_size=16 "
      "training.micro_batch_size=8 eval.interval=40 eval.iters=2 --run-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("t5, 2 encoder + 2 decoder layers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lm loss value:"), std::string::npos) << "validation reports the loss";
  const std::vector<Iteration> m = read_metrics(dir.path());
  ASSERT_EQ(m.size(), 40u);
  const auto mean = [&](size_t from) {
    double sum = 0.0;
    for (size_t i = from; i < from + 10; ++i) sum += m[i].loss;
    return sum / 10.0;
  };
  // Untrained, the loss is about log(30624) = 10.3; sentinels and [EOS] are learnt first.
  EXPECT_GT(mean(0), 9.0);
  EXPECT_LT(mean(30), mean(0) - 2.0);
}

TEST(T5Run, Bf16AndF16WithLossScalingFollowTheF32Run) {
  const std::vector<Iteration>& f32 = reference("");
  ASSERT_EQ(f32.size(), 10u);
  for (const char* dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    // f16 starts its dynamic loss scale at 2^12 so that no step overflows and is skipped.
    const Training run = train(1, std::string("precision.dtype=") + dtype +
                                      (std::string(dtype) == "f16" ? " precision.initial_loss_scale=4096" : ""));
    ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
    ASSERT_EQ(run.metrics.size(), 10u);
    for (const Iteration& it : run.metrics) {
      // 16-bit activations (8 or 11 bits of mantissa) over 4 blocks and a 30,720-way softmax:
      // the loss stays within 1% of f32's over 10 steps; a wrong cast or scale moves it by far more.
      EXPECT_NEAR(it.loss, f32[size_t(it.iteration - 1)].loss, 1e-2 * f32[size_t(it.iteration - 1)].loss)
          << "iteration " << it.iteration;
    }
  }
}

struct Layout {
  const char* name;
  int nproc;
  const char* overrides;
  const char* model = "";  // model changes the one-process reference shares
};

class T5ParallelRun : public ::testing::TestWithParam<Layout> {};

TEST_P(T5ParallelRun, MatchesOneProcessStepForStepWithDropout) {
  const std::string model = kDropout + GetParam().model;
  const Training many = train(GetParam().nproc, model + GetParam().overrides);
  ASSERT_EQ(many.result.exit_code, 0) << many.result.err;
  expect_same_run(reference(model), many.metrics);
}

// Pipelines cut between encoder and decoder (tp2 x pp2 x dp2 over 2 + 2 blocks), inside the
// encoder (pp3 over 4 + 2) and inside both stacks (pp4 over 4 + 4 as 2 virtual chunks: one block a
// chunk). Plain tp2, dp2 and pp2 are parts of these, and of the GPT and BERT layouts.
constexpr const char* kEightBlocks = "model.num_layers=4 model.decoder_num_layers=4 ";

INSTANTIATE_TEST_SUITE_P(
    Layouts, T5ParallelRun,
    ::testing::Values(
        Layout{"tp2_sp", 2, "parallel.tensor=2 parallel.sequence_parallel=true"},
        Layout{"tp2_dp2_sp_distributed_optimizer", 4,
               "parallel.tensor=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true"},
        Layout{"pp4_interleaved", 4, "parallel.pipeline=4 parallel.virtual_pipeline=2", kEightBlocks},
        Layout{"pp3_uneven_cut_inside_the_encoder", 3, "parallel.pipeline=3",
               "model.num_layers=4 model.decoder_num_layers=2 "},
        Layout{"tp2_pp2_dp2_sp_distributed_optimizer", 8,
               "parallel.tensor=2 parallel.pipeline=2 parallel.sequence_parallel=true "
               "parallel.distributed_optimizer=true"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(T5Run, RelativePositionsUnderTensorAndSequenceParallelismMatchOneProcess) {
  const std::string relative = kDropout + "model.position_embedding=relative ";
  const Training many = train(2, relative + "parallel.tensor=2 parallel.sequence_parallel=true");
  ASSERT_EQ(many.result.exit_code, 0) << many.result.err;
  expect_same_run(reference(relative), many.metrics);
}

TEST(T5Checkpoint, ResumedRunIsBitwiseTheStraightRun) { expect_bitwise_resume(t5_model()); }

TEST(T5Checkpoint, PipelineCheckpointConvertsToOneStageAndBackAndContinues) {
  test_support::TempDir save, one, back;
  const Training staged = train(3, "parallel.pipeline=3 model.num_layers=4 model.decoder_num_layers=2" +
                                       save_to(save.path()));
  ASSERT_EQ(staged.result.exit_code, 0) << staged.result.err;
  const CommandResult to = run_megatron("convert --quiet --load " + save.path().string() + " --save " +
                                        one.path().string() + " --pp 1");
  ASSERT_EQ(to.exit_code, 0) << to.err;
  const CommandResult again = run_megatron("convert --quiet --load " + one.path().string() + " --save " +
                                           back.path().string() + " --pp 2");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // Every tensor of the 3-stage checkpoint, through one stage and into two, bitwise.
  const auto original = model_tensors(save.path() / "iter_0000010");
  const auto returned = model_tensors(back.path() / "iter_0000010");
  ASSERT_EQ(returned.size(), original.size());
  for (const auto& [name, bytes] : returned) EXPECT_EQ(bytes, original.at(name)) << name;
  const Training continued = train(2, "parallel.pipeline=2 model.num_layers=4 model.decoder_num_layers=2 "
                                      "training.train_iters=12 checkpoint.load=" + back.path().string());
  ASSERT_EQ(continued.result.exit_code, 0) << continued.result.err;
  EXPECT_EQ(continued.metrics.size(), 2u);
}

TEST(T5Checkpoint, TensorParallelCheckpointContinuesInOneProcessAndAfterConvert) {
  test_support::TempDir save, one;
  const Training sharded = train(2, "parallel.tensor=2 parallel.sequence_parallel=true" + save_to(save.path()));
  ASSERT_EQ(sharded.result.exit_code, 0) << sharded.result.err;
  const Training resumed = train(1, " checkpoint.load=" + (save.path() / "iter_0000005").string());
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  expect_same_run(reference(""), resumed.metrics, kF32Tolerance, 6);

  const CommandResult to = run_megatron("convert --quiet --load " + save.path().string() +
                                        " --save " + one.path().string() + " --tp 1");
  ASSERT_EQ(to.exit_code, 0) << to.err;
  const Training continued = train(1, " checkpoint.load=" + (one.path() / "iter_0000010").string() +
                                          " training.train_iters=12");
  ASSERT_EQ(continued.result.exit_code, 0) << continued.result.err;
  EXPECT_EQ(continued.metrics.size(), 2u);
}

TEST(T5Checkpoint, AnotherDecoderDepthOrAPipelineOfRelativePositionsIsOneLine) {
  test_support::TempDir save, out;
  const Training run = train(1, "model.position_embedding=relative training.train_iters=2" + save_to(save.path()));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const Training deeper = train(1, "model.position_embedding=relative model.decoder_num_layers=3 checkpoint.load=" +
                                       save.path().string());
  EXPECT_EQ(deeper.result.exit_code, 2);
  EXPECT_NE(deeper.result.err.find("the checkpoint's model.decoder_num_layers is 2 but the recipe's is 3"),
            std::string::npos)
      << deeper.result.err;
  const CommandResult pp = run_megatron("convert --quiet --load " + save.path().string() + " --save " +
                                        out.path().string() + " --pp 2");
  EXPECT_EQ(pp.exit_code, 2);
  EXPECT_NE(pp.err.find("--pp 2: T5's relative positions train on one pipeline stage so far"),
            std::string::npos)
      << pp.err;
}

// T5 v1.1's shape with head_dim 16 (2 heads of width 32), so the queries' factor sqrt(16) is
// exact and the round trip bitwise.
const std::string kT5v11 =
    "model.position_embedding=relative model.normalization=rmsnorm model.activation=geglu "
    "model.add_bias_linear=false model.tie_embeddings=false model.num_attention_heads=2 ";

TEST(T5Checkpoint, HuggingFaceExportAndImportGiveTheModelBackAndItTrains) {
  test_support::TempDir a, hf, back;
  const Training run = train(1, kT5v11 + "training.train_iters=2 checkpoint.save=" + a.path().string());
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  // The vocabulary's padding rows (30,624 real of 30,720: 256 x tensor 1 here, 128 x tensor 2 for
  // the import) stay behind in Hugging Face.
  expect_hugging_face_round_trip(a.path(), hf.path(), back.path(),
                                 "T5ForConditionalGeneration",
                                 {"embedding.word_embeddings.weight", "output_layer.weight"}, 30624, 30720);
  const CommandResult tune = run_job("run --nproc 2 " + (back.path() / "recipe.yaml").string() +
                                     " parallel.tensor=2 checkpoint.load=" + back.path().string() +
                                     " training.train_iters=2 data.seq_length=32 data.decoder_seq_length=12"
                                     " training.lr_warmup_iters=1 --run-dir " + (back.path() / "run").string());
  EXPECT_EQ(tune.exit_code, 0) << tune.err;
}

TEST(T5Refusals, RelativePositionsInAPipelineAreOneLineNamingTheSetting) {
  const CommandResult r =
      run_job("run " + launch_args(2) + t5_model() + "parallel.pipeline=2 model.position_embedding=relative");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("parallel.pipeline: T5's relative positions train on one pipeline stage so far"),
            std::string::npos)
      << r.err;
}

TEST(T5Refusals, ADecoderTooShortForTheSpansNamesTheSetting) {
  const CommandResult r = run_job("run " + t5_model() + "data.decoder_seq_length=4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("raise it to at least"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("data.decoder_seq_length is 4"), std::string::npos) << r.err;
}

}  // namespace t5_run_test
}  // namespace megatron::cli
