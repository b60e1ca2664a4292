// The evaluation tasks: perplexity of a corpus (lm-evaluation-harness's rolling word, byte and
// bits-per-byte figures, and Megatron's overlapping-window loss, perplexity and token-ratio
// adjusted perplexity), LAMBADA-style cloze, and multiple choice by log-likelihood.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/classification_data.hpp"
#include "data/tokenizer.hpp"
#include "eval/fewshot.hpp"
#include "eval/scorer.hpp"
#include "eval/task_data.hpp"

namespace megatron::eval {

struct Metric {
  std::string name;                 // lm-evaluation-harness's where it has one: "acc", ...
  double value = 0.0;
  std::optional<double> std_error;  // of a mean over samples; none for perplexities
  bool higher_is_better = true;
};

// A generation task's sample: what the model was given, what it produced, what it should have.
struct Generated {
  std::string prompt;
  std::string prediction;
  std::vector<std::string> references;
};

// The mean of per-sample values and its standard error (sample standard deviation / sqrt(n)), as
// lm-evaluation-harness's mean_stderr.
Metric mean_metric(const std::string& name, const std::vector<double>& values);

struct TaskResult {
  std::string task;
  std::string data;          // the task's file
  int64_t num_fewshot = 0;
  int64_t samples = 0;  // documents or questions
  std::vector<Metric> metrics;
  // Each sample's lm-evaluation-harness requests, scored: a document's rolling log-likelihood
  // (perplexity), the last word (cloze), each choice (multiple choice).
  std::vector<std::vector<Score>> scores;
  std::vector<Generated> generations;  // generation tasks
};

// Scores requests with the model (eval::score bound to it); `greedy`: whether the task reads
// Score::greedy.
using ScoreFn = std::function<std::vector<Score>(const std::vector<Request>&, bool greedy)>;

struct TaskSetup {
  const data::Tokenizer& tokenizer;
  int32_t prefix_token = 0;  // end of document: the context of an empty context
  int64_t max_length = 0;    // the model's longest sequence
  ScoreFn score;
  // A fine-tuned classifier's answer for each labelled row (classification tasks).
  std::function<std::vector<int32_t>(const data::ClassificationSet&)> classify;
  // The model's greedy output text for each prompt, at most max_tokens tokens (generation).
  std::function<std::vector<std::string>(const std::vector<std::string>&, int64_t max_tokens)> generate;
};

// What perplexity scores: each document's tokens and its text (words and bytes are counted on
// the text), and the token stream Megatron's overlapping windows run over, with its text.
struct PerplexityCorpus {
  std::vector<std::vector<int32_t>> documents;
  std::vector<std::string> texts;
  std::vector<int32_t> stream;
  std::string stream_text;
};

// Text documents: each encoded on its own (lm-evaluation-harness), and joined by newlines then
// encoded once (Megatron's tasks/zeroshot_gpt).
PerplexityCorpus corpus_from_text(const std::vector<std::string>& documents,
                                  const data::Tokenizer& tokenizer);
// Token documents (an indexed dataset): the stream is the documents as stored; a document's
// trailing end-of-document token is not part of its text, so it is not scored per document.
PerplexityCorpus corpus_from_tokens(std::vector<std::vector<int32_t>> documents,
                                    const data::Tokenizer& tokenizer);

// Which perplexities to compute: lm-evaluation-harness's rolling windows (word, byte, bits per
// byte), Megatron's overlapping windows (loss, ppl, adjusted ppl), or both.
enum class Windows { Both, Rolling, Megatron };

// stride: Megatron's --overlapping-eval (its windows advance by it; 0 means max_length).
TaskResult perplexity_task(const PerplexityCorpus& corpus, const TaskSetup& setup, int64_t stride,
                           Windows windows = Windows::Both);
TaskResult cloze_task(const std::vector<std::string>& documents, const TaskSetup& setup);
// fewshot: examples put before each question (none by default).
TaskResult multiple_choice_task(const std::vector<Choice>& questions, const TaskSetup& setup,
                                const FewShot& fewshot = {});

// Counts as Python counts them: code points of UTF-8 text; pieces of re.split(r"\s+", text);
// pieces of text.strip().split(" ").
int64_t code_points(const std::string& text);
int64_t whitespace_split_pieces(const std::string& text);
int64_t space_split_pieces_of_stripped(const std::string& text);

}  // namespace megatron::eval
