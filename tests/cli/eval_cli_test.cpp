// `megatron eval` from the command line: each task runs on a trained checkpoint and writes
// lm-evaluation-harness's JSON keys; bad task files and a mismatched tokenizer are one line and
// exit 2, with nothing written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <sstream>

#include "cli/gpt2_checkpoint.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::cli {
namespace eval_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path& checkpoint() { return gpt2_checkpoint(); }

TEST(EvalCli, EachTaskWritesItsMetricsAsLmEvaluationHarnessKeys) {
  test_support::TempDir dir;
  const std::string docs = dir.write("docs.jsonl",
                                     "{\"text\": \"It is a truth universally acknowledged, that a "
                                     "single man in possession of a good fortune, must be in want "
                                     "of a wife.\"}\n{\"text\": \"Emma Woodhouse, handsome, clever, "
                                     "and rich.\"}\n").string();
  const std::string mc = dir.write("mc.jsonl",
                                   "{\"context\": \"The sky is\", \"choices\": [\"blue\", \"green\"], "
                                   "\"gold\": 0}\n{\"context\": \"Grass is\", \"choices\": [\"blue\", "
                                   "\"green\"], \"gold\": \"green\"}\n").string();
  struct Case {
    const char* task;
    std::string data;
    std::vector<const char*> keys;
  };
  for (const Case& c : {Case{"perplexity", docs, {"word_perplexity,none", "bits_per_byte,none",
                                                  "megatron_adjusted_ppl,none"}},
                        Case{"cloze", docs, {"acc,none", "acc_stderr,none", "acc_last_token,none",
                                             "perplexity,none"}},
                        Case{"multiple-choice", mc, {"acc,none", "acc_norm,none", "acc_bytes,none"}}}) {
    SCOPED_TRACE(c.task);
    const fs::path json = dir.path() / (std::string(c.task) + ".json");
    const fs::path samples = dir.path() / "logged" / (std::string(c.task) + ".jsonl");
    const CommandResult r = run_megatron("eval " + checkpoint().string() + " --task " + c.task +
                                         " --data " + c.data + kGpt2 + "--batch-size 3 --json " +
                                         json.string() + " --log-samples " + samples.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // One line a sample, with lm-evaluation-harness's fields: a log-likelihood a request.
    std::istringstream lines(slurp(samples));
    int n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      const auto s = nlohmann::json::parse(line);
      EXPECT_EQ(s["doc_id"], n);
      const auto& resps = s["filtered_resps"];
      ASSERT_EQ(resps.size(), std::string(c.task) == "multiple-choice" ? 2u : 1u) << line;
      const double ll = resps[0].is_array() ? resps[0][0].get<double>() : resps[0].get<double>();
      EXPECT_LT(ll, 0.0) << line;
    }
    EXPECT_EQ(n, 2);
    const auto j = nlohmann::json::parse(slurp(json));
    const std::string task = std::string(c.task) == "multiple-choice" ? "multiple_choice" : c.task;
    for (const char* key : c.keys) {
      ASSERT_TRUE(j["results"][task].contains(key)) << key << " in " << j.dump();
    }
    EXPECT_EQ(j["n-samples"][task]["original"], 2);
    for (const auto& [key, value] : j["results"][task].items()) {
      if (value.is_number()) EXPECT_TRUE(std::isfinite(value.get<double>())) << key;
    }
  }
}

TEST(EvalCli, BadTaskFilesAreOneLineNamingFileLineAndField) {
  test_support::TempDir dir;
  struct Bad {
    std::string text;
    std::string says;
  };
  for (const Bad& b : {Bad{"{\"context\": \"a\", \"choices\": [\"x\"], \"gold\": 3}\n", "\"gold\" = 3"},
                       Bad{"{\"context\": \"a\", \"choices\": [], \"gold\": 0}\n", "non-empty list"},
                       Bad{"{\"context\": \"a\", \"gold\": 0}\n", "no field \"choices\""},
                       Bad{"{\"context\": 7, \"choices\": [\"x\"], \"gold\": 0}\n", "not a string"},
                       Bad{"{\"context\": \"a\", \"choices\": [\"x\"], \"gold\": -1}\n", "\"gold\" = -1"},
                       Bad{"not json\n", "not JSON"}}) {
    SCOPED_TRACE(b.text);
    const std::string file = dir.write("bad.jsonl", "{\"context\": \"ok\", \"choices\": [\"x\"], "
                                                    "\"gold\": 0}\n" + b.text).string();
    const fs::path json = dir.path() / "out" / "r.json";
    const CommandResult r = run_megatron("eval " + checkpoint().string() +
                                         " --task multiple-choice --data " + file + kGpt2 +
                                         "--json " + json.string());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(file + ":2:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(json));
  }
}

// eval.tasks refuses a key its task does not read; the flags of --task are held to the same.
TEST(EvalCli, AFlagOfAnotherTaskIsRefusedNotIgnored) {
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--task perplexity --choices-field options",
            "--choices-field: only multiple-choice takes it, and --task is perplexity: drop it"},
           {"--task cloze --stride 8", "--stride: only perplexity takes it, and --task is cloze"},
           {"--task multiple-choice --max-tokens 4",
            "--max-tokens: only generation takes it, and --task is multiple-choice"},
           {"--task generation --field body",
            "--field: only perplexity and cloze takes it, and --task is generation"},
           {"--task perplexity --temperature 0.5",
            "--temperature: only generation samples, and --task is perplexity: drop it"},
           {"--task multiple-choice --seed 3 --temperature 0.7",
            "--temperature, --seed: only generation samples, and --task is multiple-choice: drop them"}}) {
    const CommandResult r = run_megatron("eval " + checkpoint().string() + " " + flags +
                                         " --data tasks.jsonl" + kGpt2);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find(says), std::string::npos) << flags << ": " << r.err;
  }
  // Without --task, the recipe's tasks are asked.
  const CommandResult r = run_megatron("eval " + checkpoint().string() +
                                       " 'eval.tasks=[{task: perplexity, data: tasks.jsonl}]' --temperature 0.5" + kGpt2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--temperature: only generation samples, and the recipe's eval.tasks hold no "
                       "generation task: drop it"),
            std::string::npos)
      << r.err;
}

TEST(EvalCli, ATokenizerLargerThanTheModelsVocabularyIsRefused) {
  test_support::TempDir dir;
  const std::string docs = dir.write("d.jsonl", "{\"text\": \"a b c d\"}\n").string();
  const CommandResult r = run_megatron(
      "eval " + checkpoint().string() + " model.vocab_size=1000 --task perplexity --data " + docs + kGpt2);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the tokenizer has 50257 tokens but the model 1000"), std::string::npos) << r.err;
}

// An override no memory could hold is a shape mismatch like any other, found before anything of
// that size is allocated (it was std::bad_alloc).
TEST(EvalCli, AHugeShapeOverrideIsRefusedAsAShapeMismatch) {
  test_support::TempDir dir;
  const std::string docs = dir.write("d.jsonl", "{\"text\": \"a b c d\"}\n").string();
  for (const char* o : {"model.hidden_size=1000000 model.num_attention_heads=1000",
                        "model.vocab_size=100000000", "model.max_position_embeddings=100000000 "
                        "data.seq_length=100000000"}) {
    const CommandResult r = run_megatron("eval " + checkpoint().string() + " " + o +
                                         " --task perplexity --data " + docs + kGpt2);
    EXPECT_EQ(r.exit_code, 2) << o << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("in the checkpoint but")) << o;
  }
}

// The metrics of a results file, by name.
std::map<std::string, double> metrics_of(const fs::path& json) {
  std::map<std::string, double> out;
  const auto j = nlohmann::json::parse(slurp(json));
  for (const auto& [task, values] : j["results"].items()) {
    for (const auto& [key, value] : values.items()) {
      if (value.is_number()) out[task + "/" + key] = value.get<double>();
    }
  }
  return out;
}

TEST(EvalCli, EveryLayoutScoresTheSameNumbers) {
  test_support::TempDir dir;
  const std::string docs = dir.write("docs.jsonl",
                                     "{\"text\": \"It is a truth universally acknowledged, that a "
                                     "single man in possession of a good fortune, must be in want "
                                     "of a wife.\"}\n{\"text\": \"Emma Woodhouse, handsome, clever, "
                                     "and rich, with a comfortable home and happy disposition.\"}\n"
                                     "{\"text\": \"She was the youngest of the two daughters.\"}\n").string();
  // Perplexity reads log-likelihoods; cloze also each token's argmax (over vocabulary shards).
  for (const std::string task : {"perplexity", "cloze"}) {
    std::map<std::string, double> one;
    std::string one_samples;
    for (const std::string layout : {"--threads 1", "--nproc 2", "--nproc 2 parallel.tensor=2",
                                     "--nproc 2 parallel.pipeline=2",
                                     "--nproc 4 parallel.tensor=2 parallel.pipeline=2"}) {
      SCOPED_TRACE(task + " " + layout);
      const fs::path json = dir.path() / "r.json", samples = dir.path() / "s.jsonl";
      const CommandResult r = run_job("eval " + checkpoint().string() + " --task " + task + " --data " +
                                      docs + kGpt2 + "--batch-size 2 --json " + json.string() +
                                      " --log-samples " + samples.string() + " " + layout);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto got = metrics_of(json);
      std::string greedy;  // each request's is_greedy, in order
      std::istringstream lines(slurp(samples));
      for (std::string line; std::getline(lines, line);) {
        const nlohmann::json sample = nlohmann::json::parse(line);  // outlives the loop below
        for (const auto& resp : sample["filtered_resps"]) {
          if (resp.is_array()) greedy += resp[1].get<bool>() ? '1' : '0';
        }
      }
      if (one.empty()) {
        one = got;
        one_samples = greedy;
        continue;
      }
      ASSERT_EQ(got.size(), one.size());
      // Data-parallel ranks run the very batches one process runs; tensor-parallel layers add
      // their partial sums in another order (f32, a model of width 128: well under 1e-5).
      for (const auto& [key, value] : one) EXPECT_NEAR(got.at(key), value, 1e-5 * std::abs(value)) << key;
      EXPECT_EQ(greedy, one_samples);
    }
  }
}

TEST(EvalCli, TheBatchSizeDoesNotChangeTheScores) {
  test_support::TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "It is a truth universally acknowledged, number " + std::to_string(i) + ". ";
  const std::string docs = dir.write("long.jsonl", "{\"text\": \"" + text + "\"}\n").string();
  std::map<std::string, double> got[2];
  for (int i = 0; i < 2; ++i) {
    // Batch 8 of full windows: more scored rows than one chunk of the output layer's logits.
    const fs::path json = dir.path() / ("b" + std::to_string(i) + ".json");
    const CommandResult r = run_megatron("eval " + checkpoint().string() + " --task perplexity --data " +
                                         docs + kGpt2 + "--json " + json.string() +
                                         (i == 0 ? " --batch-size 1" : " --batch-size 8"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    got[i] = metrics_of(json);
  }
  // Other GEMM shapes, so other f32 blockings: the same numbers within f32 rounding.
  for (const auto& [key, value] : got[0]) EXPECT_NEAR(got[1].at(key), value, 1e-5 * std::abs(value)) << key;
}

TEST(EvalCli, AnIndexedDatasetHasTheWordAndBytePerplexitiesOfItsText) {
  test_support::TempDir dir;
  const std::string docs = dir.write("docs.jsonl",
                                     "{\"text\": \"It is a truth universally acknowledged, that a "
                                     "single man must be in want of a wife.\"}\n{\"text\": \"Emma "
                                     "Woodhouse, handsome, clever, and rich.\"}\n").string();
  const std::string prefix = (dir.path() / "docs").string();
  ASSERT_EQ(run_megatron("preprocess --quiet --input " + docs + " --output-prefix " + prefix +
                         " --tokenizer gpt2-bpe" + kGpt2 + "--append-eod").exit_code, 0);
  const fs::path from_text = dir.path() / "text.json", from_tokens = dir.path() / "tokens.json";
  const std::string base = "eval " + checkpoint().string() + " --task perplexity" + kGpt2 + "--data ";
  ASSERT_EQ(run_megatron(base + docs + " --json " + from_text.string()).exit_code, 0);
  const CommandResult r = run_megatron(base + prefix + "_text_document --json " + from_tokens.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = metrics_of(from_text), tokens = metrics_of(from_tokens);
  // The same tokens, scored in the same windows (the stored end-of-document is not text).
  for (const char* key : {"perplexity/word_perplexity,none", "perplexity/byte_perplexity,none",
                          "perplexity/bits_per_byte,none"}) {
    EXPECT_DOUBLE_EQ(tokens.at(key), text.at(key)) << key;
  }
  // Megatron's stream holds the stored end-of-document tokens where the text had newlines.
  EXPECT_NE(tokens.at("perplexity/megatron_lm_loss,none"), text.at("perplexity/megatron_lm_loss,none"));
}

TEST(EvalCli, AHuggingFaceImportScoresAsTheCheckpointItCameFrom) {
  test_support::TempDir dir;
  const std::string docs = dir.write("d.jsonl", "{\"text\": \"It is a truth universally "
                                                 "acknowledged, that a single man must be in want "
                                                 "of a wife.\"}\n").string();
  const fs::path hf = dir.path() / "hf", imported = dir.path() / "imported";
  ASSERT_EQ(run_megatron("convert --to hf --load " + checkpoint().string() + " --save " + hf.string()).exit_code, 0);
  ASSERT_EQ(run_megatron("convert --from hf --load " + hf.string() + " --save " + imported.string()).exit_code, 0);
  std::map<std::string, double> got[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path json = dir.path() / ("r" + std::to_string(i) + ".json");
    const CommandResult r = run_megatron("eval " + (i == 0 ? checkpoint() : imported).string() +
                                         " --task perplexity --data " + docs + kGpt2 + "--json " + json.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    got[i] = metrics_of(json);
  }
  // The same f32 weights (the export and import are exact) in the same windows.
  EXPECT_EQ(got[0], got[1]);
}

TEST(EvalCli, OnTheGpuEveryTaskScoresAsOnTheCpu) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  test_support::TempDir dir;
  const std::string docs = dir.write("docs.jsonl",
                                     "{\"text\": \"It is a truth universally acknowledged, that a "
                                     "single man must be in want of a wife.\"}\n{\"text\": \"Emma "
                                     "Woodhouse, handsome, clever, and rich.\"}\n").string();
  for (const char* task : {"perplexity", "cloze"}) {
    SCOPED_TRACE(task);
    std::map<std::string, double> got[2];
    for (int gpu = 0; gpu < 2; ++gpu) {
      const fs::path json = dir.path() / (std::string(task) + std::to_string(gpu) + ".json");
      const CommandResult r = run_megatron(
          "eval " + checkpoint().string() + " precision.allow_tf32=false --task " + task +
          " --data " + docs + kGpt2 + "--batch-size 2 --json " + json.string() +
          (gpu ? " --device cuda" : " --device cpu"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      got[gpu] = metrics_of(json);
    }
    // f32 on both, in another summation order: log-likelihoods of a few dozen tokens.
    for (const auto& [key, value] : got[0]) EXPECT_NEAR(got[1].at(key), value, 1e-4 * std::abs(value) + 1e-9) << key;
  }
}

TEST(EvalCli, ContextAndSequenceParallelLayoutsAreRefusedBeforeAnyRankStarts) {
  test_support::TempDir dir;
  const std::string docs = dir.write("d.jsonl", "{\"text\": \"a b c d\"}\n").string();
  for (const char* layout : {"parallel.context=2", "parallel.tensor=2 parallel.sequence_parallel=true"}) {
    SCOPED_TRACE(layout);
    const CommandResult r = run_megatron("eval " + checkpoint().string() + " " + layout +
                                         " --nproc 2 --task perplexity --data " + docs + kGpt2);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("set parallel.context=1 and parallel.sequence_parallel=false"),
              std::string::npos) << r.err;
  }
}

TEST(EvalCli, WithoutTaskTheRecipesEvalTasksRunIntoOneResultsFile) {
  test_support::TempDir dir;
  const std::string a = dir.write("a.jsonl", "{\"text\": \"It is a truth universally acknowledged.\"}\n").string();
  const std::string b = dir.write("b.jsonl", "{\"text\": \"Emma Woodhouse, handsome, clever, and rich.\"}\n").string();
  const fs::path json = dir.path() / "r.json";
  const std::string tasks = "'eval.tasks=[{task: perplexity, data: " + a + ", windows: rolling}, {task: perplexity, data: " +
                            b + "}, {task: cloze, data: " + b + "}]'";
  const CommandResult r = run_megatron("eval " + checkpoint().string() + " " + tasks + kGpt2 + "--json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  // Tasks of one kind are named apart by their files.
  EXPECT_TRUE(j["results"].contains("perplexity:a")) << j.dump();
  EXPECT_TRUE(j["results"].contains("perplexity:b")) << j.dump();
  EXPECT_TRUE(j["results"].contains("cloze")) << j.dump();
  EXPECT_FALSE(j["results"]["perplexity:a"].contains("megatron_ppl,none"));  // windows: rolling
  EXPECT_TRUE(j["results"]["perplexity:b"].contains("megatron_ppl,none"));
  EXPECT_EQ(j["configs"]["perplexity:b"]["dataset_path"], b);
  // The same document scored as the --task flags score it.
  const fs::path one = dir.path() / "one.json";
  ASSERT_EQ(run_megatron("eval " + checkpoint().string() + " --task perplexity --data " + b + kGpt2 +
                         "--json " + one.string()).exit_code, 0);
  EXPECT_EQ(metrics_of(one).at("perplexity/word_perplexity,none"),
            j["results"]["perplexity:b"]["word_perplexity,none"].get<double>());
}

TEST(EvalCli, AnOutputThatIsAnInputIsRefusedBeforeAnyWork) {
  test_support::TempDir dir;
  const fs::path data = dir.write("d.jsonl", "{\"text\": \"a b c d\"}\n");
  const fs::path link = dir.path() / "link.jsonl";
  fs::create_symlink(data, link);
  // No checkpoint there: refused before the checkpoint is read.
  const std::string none = (dir.path() / "no-checkpoint").string();
  const std::string same = (dir.path() / "." / "d.jsonl").string();
  for (const std::string& outputs : {"--json " + data.string(), "--log-samples " + link.string(),
                                     "--json " + same}) {
    SCOPED_TRACE(outputs);
    const CommandResult r =
        run_megatron("eval " + none + " --task perplexity --data " + data.string() + " " + outputs);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(outputs + " and --data " + data.string() + " are the same file"),
              std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // The recipe's eval.tasks likewise, before the model is built.
  const CommandResult r = run_megatron("eval " + checkpoint().string() + " 'eval.tasks=[{task: perplexity, data: " +
                                       data.string() + "}]'" + kGpt2 + "--json " + link.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--json " + link.string() + " and eval.tasks' data " + data.string()), std::string::npos) << r.err;
  EXPECT_EQ(slurp(data), "{\"text\": \"a b c d\"}\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
}

TEST(EvalCli, ResultsReachDevStdoutAfterTheTableAndASymlinkStaysALink) {
  test_support::TempDir dir;
  const std::string data = dir.write("d.jsonl", "{\"text\": \"It is a truth universally acknowledged.\"}\n").string();
  const fs::path target = dir.write("real/samples.jsonl", "old\n");
  const fs::path link = dir.path() / "samples.jsonl";
  fs::create_symlink(target, link);
  const CommandResult r = run_megatron("eval " + checkpoint().string() + " --task perplexity --data " + data + kGpt2 +
                                       "--json /dev/stdout --log-samples " + link.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // stdout: the table, then the results JSON written through the same descriptor.
  const size_t brace = r.out.find("\n{");
  ASSERT_NE(brace, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("perplexity"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(r.out.substr(brace + 1))["results"].contains("perplexity")) << r.out;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(nlohmann::json::parse(slurp(target))["doc_id"], 0);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(EvalCli, TaskFlagsWithoutTaskAndNoTaskAtAllAreRefused) {
  const CommandResult flags = run_megatron("eval " + checkpoint().string() + " --data x.jsonl" + kGpt2);
  EXPECT_EQ(flags.exit_code, 2);
  EXPECT_NE(flags.err.find("--data describes --task"), std::string::npos) << flags.err;
  const CommandResult none = run_megatron("eval " + checkpoint().string() + kGpt2);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no task: give --task and --data, or list tasks in the recipe's eval.tasks"),
            std::string::npos) << none.err;
}

TEST(EvalCli, FewShotOutsideMultipleChoiceIsRefused) {
  test_support::TempDir dir;
  const std::string docs = dir.write("d.jsonl", "{\"text\": \"a b c d\"}\n").string();
  const CommandResult r = run_megatron("eval " + checkpoint().string() + " --task cloze --num-fewshot 2 --data " +
                                       docs + kGpt2);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--num-fewshot: only multiple-choice takes it, and --task is cloze"),
            std::string::npos) << r.err;
}

TEST(EvalCli, FewShotPromptsAreRecordedAndTooFewExamplesAreRefused) {
  test_support::TempDir dir;
  const std::string mc = dir.write("mc.jsonl",
                                   "{\"context\": \"The sky is\", \"choices\": [\"blue\", \"green\"], "
                                   "\"gold\": 0}\n{\"context\": \"Grass is\", \"choices\": [\"blue\", "
                                   "\"green\"], \"gold\": 1}\n{\"context\": \"Snow is\", \"choices\": "
                                   "[\"white\", \"black\"], \"gold\": 0}\n").string();
  const fs::path zero = dir.path() / "zero.json", two = dir.path() / "two.json";
  const std::string base = "eval " + checkpoint().string() + " --task multiple-choice --data " + mc + kGpt2;
  ASSERT_EQ(run_megatron(base + "--json " + zero.string()).exit_code, 0);
  const CommandResult r = run_megatron(base + "--num-fewshot 2 --json " + two.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(two));
  EXPECT_EQ(j["n-shot"]["multiple_choice"], 2);
  EXPECT_EQ(j["configs"]["multiple_choice"]["num_fewshot"], 2);
  EXPECT_EQ(metrics_of(zero).size(), metrics_of(two).size());

  const fs::path json = dir.path() / "out" / "r.json";
  const CommandResult bad = run_megatron(base + "--num-fewshot 5 --json " + json.string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--num-fewshot 5 needs 5 examples besides each question, but the few-shot file has only 2"),
            std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(json.parent_path()));
}

}  // namespace eval_cli_test
}  // namespace megatron::cli
