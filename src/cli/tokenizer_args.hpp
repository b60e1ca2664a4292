// The tokenizer options of the commands that tokenize (preprocess, tokenize, eval): the
// type and its files, and the tokenizer they make.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "data/tokenizer.hpp"
#include "train/checkpoint_job.hpp"

namespace megatron::cli {

struct TokenizerArgs : train::TokenizerChoice {
  void add_to(CLI::App* cmd, bool required) {
    auto* opt = cmd->add_option("--tokenizer,--tokenizer-type", type,
                                "gpt2-bpe, bert-wordpiece-lowercase, bert-wordpiece-cased, "
                                "sentencepiece or huggingface (Megatron-LM's names are accepted too)");
    if (required) opt->required();
    cmd->add_option("--vocab-file", files.vocab_file, "vocab.json (GPT-2) or vocab.txt (BERT)");
    cmd->add_option("--merge-file", files.merge_file, "merges.txt (GPT-2)");
    cmd->add_option("--tokenizer-model", files.tokenizer_model, "SentencePiece .model file, or tokenizer.json (or its directory) for huggingface");
  }
  std::unique_ptr<data::Tokenizer> load() const { return train::load_tokenizer(*this); }
};

}  // namespace megatron::cli
