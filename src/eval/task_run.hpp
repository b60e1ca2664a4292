// One evaluation task end to end: what the --task flags or a recipe's eval.tasks entry ask for,
// its input read and checked before any model is built, and the run that scores it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/classification_data.hpp"
#include "eval/tasks.hpp"
#include "recipe/recipe.hpp"

namespace megatron::eval {

struct TaskSpec {
  std::string task;  // perplexity, cloze, multiple-choice, classification or generation
  std::string data;
  std::string field = "text";
  ChoiceFields choice_fields;
  int64_t stride = 32;
  Windows windows = Windows::Both;
  int64_t num_fewshot = 0;
  std::string fewshot_data;  // empty: the task's own file
  // generation: each prompt (source, for T5) and its reference answers (a string or a list of
  // strings), the metrics on the greedy outputs, and the outputs' longest.
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  std::vector<std::string> metrics = {"exact_match", "f1"};
  int64_t max_tokens = 32;
};

// "exact_match,f1" as a list, each checked to be exact_match, f1, bleu or chrf (UserError).
std::vector<std::string> metrics_named(const std::string& names);

// An eval.tasks entry with the flags' defaults where it says nothing.
TaskSpec task_spec(const recipe::EvalTask& entry);
Windows windows_named(const std::string& name);  // rolling, megatron or both

struct TaskInput {
  TaskSpec spec;
  std::vector<std::string> documents;                 // perplexity (text) and cloze
  std::optional<std::vector<std::vector<int32_t>>> token_documents;  // an indexed dataset
  std::vector<Choice> questions;                      // multiple choice
  FewShot fewshot;
  std::shared_ptr<const data::ClassificationSet> labelled;  // classification
  std::vector<GenerationExample> generation;          // generation
  int64_t samples() const;
};

// Reads and checks the task's files (UserError naming file, line and field). Classification
// reads its rows as the recipe's finetune section lays them out.
TaskInput read_task_input(const TaskSpec& spec, const data::Tokenizer& tokenizer,
                          const recipe::FinetuneSection& finetune = {});

// Scores the task; the result records its data file and shots.
TaskResult run_task(TaskInput input, const TaskSetup& setup);

}  // namespace megatron::eval
