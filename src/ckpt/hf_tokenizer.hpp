// A Hugging Face model directory's tokenizer: the files `AutoTokenizer.from_pretrained` loads
// (tokenizer.json, GPT-2's vocab.json and merges.txt, BERT's vocab.txt, SentencePiece's tokenizer.model, with
// tokenizer_config.json and special_tokens_map.json) written beside an exported model, and
// found again in a directory being imported.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "recipe/recipe.hpp"

namespace megatron::ckpt {

struct HfTokenizerFiles {
  recipe::Tokenizer kind = recipe::Tokenizer::Gpt2Bpe;
  std::string vocab_file;       // GPT-2 vocab.json, BERT vocab.txt
  std::string merge_file;       // GPT-2 merges.txt
  std::string tokenizer_model;  // SentencePiece .model, or tokenizer.json
};

// Copies the files into `dir` under Hugging Face's names and writes the two JSON files.
// `max_length`: the model's positions (model_max_length; 0: not written). Throws RuntimeFailure when a file
// cannot be copied, UserError when the kind lacks one of its files.
void write_hf_tokenizer(const HfTokenizerFiles& files, const std::filesystem::path& dir,
                        int64_t max_length);

// The tokenizer a checkpoint's recipe (YAML) names: data.tokenizer and its files; kind Null and
// no files where the recipe says nothing readable. Never throws: the recipe is untrusted.
HfTokenizerFiles tokenizer_of_recipe(const std::string& recipe_yaml);

// The tokenizer files an imported directory has, as absolute paths, or nullopt: tokenizer.json
// first, as AutoTokenizer loads it, except for BERT and T5 (`arch`), whose data Megatron makes
// with a WordPiece vocab.txt: theirs first where the directory has one.
std::optional<HfTokenizerFiles> find_hf_tokenizer(const std::filesystem::path& dir, recipe::Arch arch);

}  // namespace megatron::ckpt
