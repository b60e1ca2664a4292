// The files evaluation tasks read: jsonl documents (a text field) or plain text for
// perplexity and cloze, jsonl with context, choices and gold for multiple choice. Validated
// where they enter: a missing field, an empty choice list or a gold answer out of range is one
// UserError naming the file, line and field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatron::eval {

// Every document of a .jsonl file (`field` of each line) or, for any other file, its whole text
// as one document.
std::vector<std::string> read_documents(const std::string& path, const std::string& field);

// A Megatron indexed dataset's prefix (PREFIX.bin and PREFIX.idx exist; `path` may also name
// either file): what perplexity reads as token documents.
std::optional<std::string> indexed_dataset_prefix(const std::string& path);

// Each document of the indexed dataset at `prefix`, its sequences joined, every id checked to lie
// in [0, vocab_size) (a UserError naming the dataset and sequence otherwise).
std::vector<std::vector<int32_t>> read_token_documents(const std::string& prefix, int64_t vocab_size);

struct Choice {
  std::string context;
  std::vector<std::string> choices;
  int64_t gold = 0;
};

struct ChoiceFields {
  std::string context = "context";
  std::string choices = "choices";
  std::string gold = "gold";  // an index into choices, or the text of one of them
};

std::vector<Choice> read_choices(const std::string& path, const ChoiceFields& fields);

struct GenerationExample {
  std::string prompt;
  std::vector<std::string> references;  // at least one
};

// jsonl: the prompt field's string and the answer field's string or non-empty list of strings.
std::vector<GenerationExample> read_generation(const std::string& path, const std::string& prompt_field,
                                               const std::string& answer_field);

}  // namespace megatron::eval
