// The evaluation tasks: perplexity of a corpus (lm-evaluation-harness's rolling word, byte and
// bits-per-byte figures, and Megatron's overlapping-window loss, perplexity and token-ratio
// adjusted perplexity), LAMBADA-style cloze, and multiple choice by log-likelihood.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"
#include "eval/scorer.hpp"
#include "eval/task_data.hpp"

namespace megatron::eval {

struct Metric {
  std::string name;                 // lm-evaluation-harness's where it has one: "acc", ...
  double value = 0.0;
  std::optional<double> std_error;  // of a mean over samples; none for perplexities
  bool higher_is_better = true;
};

struct TaskResult {
  std::string task;
  int64_t samples = 0;  // documents or questions
  std::vector<Metric> metrics;
};

// Scores requests with the model (eval::score bound to it).
using ScoreFn = std::function<std::vector<Score>(const std::vector<Request>&)>;

struct TaskSetup {
  const data::Tokenizer& tokenizer;
  int32_t prefix_token = 0;  // end of document: the context of an empty context
  int64_t max_length = 0;    // the model's longest sequence
  ScoreFn score;
};

// stride: Megatron's --overlapping-eval (its windows advance by it; 0 means max_length).
TaskResult perplexity_task(const std::vector<std::string>& documents, const TaskSetup& setup,
                           int64_t stride);
TaskResult cloze_task(const std::vector<std::string>& documents, const TaskSetup& setup);
TaskResult multiple_choice_task(const std::vector<Choice>& questions, const TaskSetup& setup);

// Counts as Python counts them: code points of UTF-8 text; pieces of re.split(r"\s+", text);
// pieces of text.strip().split(" ").
int64_t code_points(const std::string& text);
int64_t whitespace_split_pieces(const std::string& text);
int64_t space_split_pieces_of_stripped(const std::string& text);

}  // namespace megatron::eval
