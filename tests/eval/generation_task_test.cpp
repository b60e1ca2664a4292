// The generation task on constructed outputs: its metrics, the reference layout it hands the
// corpus scores, the files it reads, and the metric names it takes.
#include "eval/generation_task.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "eval/task_run.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::eval {
namespace generation_task_test {

using ::testing::HasSubstr;

// A setup whose "model" answers each prompt from a table.
TaskSetup answering(const data::Tokenizer& tokenizer, std::map<std::string, std::string> answers) {
  return {.tokenizer = tokenizer,
          .generate = [answers](const std::vector<std::string>& prompts, int64_t) {
            std::vector<std::string> out;
            for (const auto& p : prompts) out.push_back(answers.at(p));
            return out;
          }};
}

const data::Tokenizer& any_tokenizer() {
  static const std::unique_ptr<data::Tokenizer> t = data::make_tokenizer(
      recipe::Tokenizer::BertWordPieceLowerCase,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/bert-base-uncased/vocab.txt"});
  return *t;
}

double metric(const TaskResult& r, const std::string& name) {
  for (const Metric& m : r.metrics) {
    if (m.name == name) return m.value;
  }
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

TEST(GenerationTask, ExactMatchAndF1AreSquadsBestOverTheReferencesAveraged) {
  const std::vector<GenerationExample> examples = {{.prompt = "a", .references = {"Paris", "the city of Paris"}},
                                                   {.prompt = "b", .references = {"blue sky"}}};
  const TaskResult r = generation_task(examples, {"exact_match", "f1"}, 8,
                                       answering(any_tokenizer(), {{"a", "paris."}, {"b", "sky"}}));
  EXPECT_EQ(r.samples, 2);
  EXPECT_DOUBLE_EQ(metric(r, "exact_match"), 0.5);  // "paris." normalises to "paris"
  EXPECT_DOUBLE_EQ(metric(r, "f1"), (1.0 + 2.0 / 3.0) / 2.0);  // "sky" vs "blue sky": P 1, R 1/2
  ASSERT_EQ(r.generations.size(), 2u);
  EXPECT_EQ(r.generations[1].prediction, "sky");
  EXPECT_EQ(r.generations[0].references.size(), 2u);
}

// An example with fewer references than another has none in the later stream: sacreBLEU's None.
// Golden values from sacrebleu 2.6.0: corpus_bleu / corpus_chrf(h, [[ref a, ref b], [ref a2, None]]).
TEST(GenerationTask, UnevenReferenceCountsScoreAsSacrebleuScoresAMissingReference) {
  const std::vector<GenerationExample> examples = {
      {.prompt = "1", .references = {"the cat sat on a mat", "there is a cat on the mat"}},
      {.prompt = "2", .references = {"a dog barked loud today"}}};
  const TaskResult r = generation_task(
      examples, {"bleu", "chrf"}, 8,
      answering(any_tokenizer(), {{"1", "the cat sat on the mat"}, {"2", "a dog barked loudly today"}}));
  EXPECT_NEAR(metric(r, "bleu"), 51.930717786806774, 1e-9);
  EXPECT_NEAR(metric(r, "chrf"), 77.49869949070678, 1e-9);
  EXPECT_EQ(r.metrics.size(), 2u);  // only what was asked for
}

TEST(GenerationTask, MetricNamesAreCheckedAndRepeatsKeptOnce) {
  EXPECT_EQ(metrics_named("bleu,chrf,bleu"), (std::vector<std::string>{"bleu", "chrf"}));
  for (const char* bad : {"", "bleu,", "BLEU", "rouge", "bleu,,f1"}) {
    EXPECT_THAT(test_support::user_error_of([&] { metrics_named(bad); }),
                HasSubstr("is not one of exact_match, f1, bleu, chrf"))
        << bad;
  }
}

TEST(GenerationTask, BadFilesAreOneLineNamingFileLineAndField) {
  test_support::TempDir dir;
  const auto error = [&](const std::string& text) {
    const std::string path = dir.write("bad.jsonl", text).string();
    return test_support::user_error_of([&] { read_generation(path, "prompt", "answer"); });
  };
  EXPECT_THAT(error("{\"prompt\": \"q\", \"answer\": []}\n"),
              HasSubstr("bad.jsonl:1: field \"answer\" must be a string or a non-empty list of strings"));
  EXPECT_THAT(error("{\"prompt\": \"q\", \"answer\": [\"a\", 3]}\n"),
              HasSubstr("bad.jsonl:1: field \"answer\" is number, not a string"));
  EXPECT_THAT(error("{\"prompt\": 1, \"answer\": \"a\"}\n"), HasSubstr("bad.jsonl:1: field \"prompt\" is number"));
  EXPECT_THAT(error("{\"prompt\": \"q\"}\n"), HasSubstr("bad.jsonl:1: no field \"answer\""));
  EXPECT_THAT(error("{\"prompt\": \"q\", \"answer\": \"a\"}\n{\"prompt\"\n"), HasSubstr("bad.jsonl:2: not JSON"));
  EXPECT_THAT(error("\n\n"), HasSubstr("bad.jsonl: no prompts"));
  const std::string fine = dir.write("ok.jsonl", "{\"prompt\": \"q\", \"answer\": [\"a\", \"b\"]}\n").string();
  EXPECT_EQ(read_generation(fine, "prompt", "answer")[0].references, (std::vector<std::string>{"a", "b"}));
}

}  // namespace generation_task_test
}  // namespace megatron::eval
