// Each task's metrics on constructed inputs whose answers are known: a stand-in scorer gives
// every token a log-probability of -1 (or a table's value per continuation), so word, byte and
// Megatron perplexities, cloze and multiple-choice accuracies follow by hand.
#include "eval/tasks.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>

#include "data/tokenizer.hpp"

namespace megatron::eval {
namespace tasks_test {

const data::Tokenizer& gpt2() {
  static const std::unique_ptr<data::Tokenizer> t = data::make_tokenizer(
      data::TokenizerKind::Gpt2Bpe,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json",
       .merge_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt"});
  return *t;
}

constexpr int32_t kEod = 50256;

// -1 per continuation token; greedy when the continuation's text is in `greedy`.
ScoreFn minus_one_per_token(std::vector<std::string> greedy = {}) {
  return [greedy](const std::vector<Request>& requests, bool) {
    std::vector<Score> out;
    for (const Request& r : requests) {
      const std::string text = gpt2().decode(r.continuation);
      out.push_back({.logprob = -double(r.continuation.size()),
                     .greedy = std::find(greedy.begin(), greedy.end(), text) != greedy.end(),
                     .tokens = int64_t(r.continuation.size())});
    }
    return out;
  };
}

double metric(const TaskResult& r, const std::string& name) {
  for (const Metric& m : r.metrics) {
    if (m.name == name) return m.value;
  }
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

TEST(PerplexityTask, WordByteAndMegatronFiguresFollowFromEachTokensLogProbability) {
  const std::vector<std::string> docs = {"It is a truth universally acknowledged.",
                                         "Emma Woodhouse, handsome, clever, and rich."};
  const TaskSetup setup{.tokenizer = gpt2(), .prefix_token = kEod, .max_length = 8,
                        .score = minus_one_per_token()};
  const PerplexityCorpus corpus = corpus_from_text(docs, gpt2());
  const TaskResult r = perplexity_task(corpus, setup, 3);
  double tokens = 0, words = 0, bytes = 0;
  for (const std::string& d : docs) {
    tokens += double(gpt2().encode(d).size());
    words += double(whitespace_split_pieces(d));
    bytes += double(d.size());
  }
  EXPECT_DOUBLE_EQ(metric(r, "word_perplexity"), std::exp(tokens / words));
  EXPECT_DOUBLE_EQ(metric(r, "byte_perplexity"), std::exp(tokens / bytes));
  EXPECT_DOUBLE_EQ(metric(r, "bits_per_byte"), tokens / bytes / std::numbers::ln2);
  // Every target of the joined stream scored once, whatever the stride.
  EXPECT_DOUBLE_EQ(metric(r, "megatron_lm_loss"), 1.0);
  EXPECT_DOUBLE_EQ(metric(r, "megatron_ppl"), std::numbers::e);
  const double stream = double(gpt2().encode(docs[0] + "\n" + docs[1]).size());
  const double ratio = (stream - 1) / (double(space_split_pieces_of_stripped(docs[0] + "\n" + docs[1])) - 1);
  EXPECT_DOUBLE_EQ(metric(r, "megatron_token_ratio"), ratio);
  EXPECT_DOUBLE_EQ(metric(r, "megatron_adjusted_ppl"), std::exp(ratio));
  EXPECT_EQ(r.samples, 2);
}

TEST(PerplexityTask, StoredTokenDocumentsLeaveTheirEndOfDocumentOutOfTheirText) {
  std::vector<int32_t> a = gpt2().encode("Hello there, world."), b = gpt2().encode("Goodbye.");
  const size_t a_tokens = a.size(), b_tokens = b.size();
  a.push_back(kEod);
  b.push_back(kEod);
  const PerplexityCorpus c = corpus_from_tokens({a, b}, gpt2());
  ASSERT_EQ(c.documents.size(), 2u);
  EXPECT_EQ(c.documents[0].size(), a_tokens);
  EXPECT_EQ(c.documents[1].size(), b_tokens);
  EXPECT_EQ(c.texts[0], "Hello there, world.");
  EXPECT_EQ(c.stream.size(), a_tokens + b_tokens + 2);  // as stored
  const TaskSetup setup{.tokenizer = gpt2(), .prefix_token = kEod, .max_length = 4,
                        .score = minus_one_per_token()};
  const TaskResult r = perplexity_task(c, setup, 2);
  EXPECT_DOUBLE_EQ(metric(r, "byte_perplexity"), std::exp(double(a_tokens + b_tokens) / 27.0));
  EXPECT_DOUBLE_EQ(metric(r, "megatron_lm_loss"), 1.0);
}

TEST(ClozeTask, StrictAccuracyNeedsTheWholeLastWordAndPerplexityIsOverLastWords) {
  const std::vector<std::string> docs = {"must be in want of a wife", "clever, and rich"};
  const TaskSetup setup{.tokenizer = gpt2(), .prefix_token = kEod, .max_length = 64,
                        .score = minus_one_per_token({" wife"})};
  const TaskResult r = cloze_task(docs, setup);
  EXPECT_DOUBLE_EQ(metric(r, "acc"), 0.5);
  EXPECT_DOUBLE_EQ(metric(r, "acc_last_token"), 0.5);
  EXPECT_DOUBLE_EQ(metric(r, "perplexity"), std::numbers::e);  // one token a word
  EXPECT_DOUBLE_EQ(r.metrics[1].std_error.value(), 0.5);     // sd of {1, 0} over sqrt(2)
}

TEST(MultipleChoiceTask, AccuracyByLikelihoodByCharactersAndByBytesEachPickTheirOwnAnswer) {
  const std::map<std::string, double> ll = {{" a", -2.0},  {" bbbb", -4.0}, {" \xc3\xa9\xc3\xa9\xc3\xa9", -3.3},
                                            {" abcd", -4.0}, {" x", -1.0},    {" y", -5.0}};
  const TaskSetup setup{.tokenizer = gpt2(), .prefix_token = kEod, .max_length = 64,
                        .score = [&](const std::vector<Request>& requests, bool) {
                          std::vector<Score> out;
                          for (const Request& r : requests) out.push_back({.logprob = ll.at(gpt2().decode(r.continuation))});
                          return out;
                        }};
  const std::vector<Choice> questions = {
      {.context = "One", .choices = {"a", "bbbb"}, .gold = 0},  // acc right, acc_norm wrong
      {.context = "Two", .choices = {"\xc3\xa9\xc3\xa9\xc3\xa9", "abcd"}, .gold = 1},  // only acc_norm right
      {.context = "Three", .choices = {"x", "y"}, .gold = 0}};  // all right
  const TaskResult r = multiple_choice_task(questions, setup);
  EXPECT_DOUBLE_EQ(metric(r, "acc"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(metric(r, "acc_norm"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(metric(r, "acc_bytes"), 1.0 / 3.0);
}

TEST(MultipleChoiceTask, FewShotExamplesAreTheContextEveryChoiceIsScoredAfter) {
  std::vector<std::string> contexts;
  const TaskSetup setup{.tokenizer = gpt2(), .prefix_token = kEod, .max_length = 64,
                        .score = [&](const std::vector<Request>& requests, bool) {
                          for (const Request& r : requests) contexts.push_back(gpt2().decode(r.context));
                          return std::vector<Score>(requests.size());
                        }};
  const std::vector<Choice> questions = {{.context = "Red and", .choices = {"blue", "green"}, .gold = 1},
                                         {.context = "Salt and", .choices = {"pepper"}, .gold = 0}};
  multiple_choice_task(questions, setup, {.shots = 1, .examples = questions, .examples_are_the_task = true});
  ASSERT_EQ(contexts.size(), 3u);
  EXPECT_EQ(contexts[0], "Salt and pepper\n\nRed and");
  EXPECT_EQ(contexts[1], "Salt and pepper\n\nRed and");
  EXPECT_EQ(contexts[2], "Red and green\n\nSalt and");
}

}  // namespace tasks_test
}  // namespace megatron::eval
