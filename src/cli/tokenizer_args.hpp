// The tokenizer options of the commands that tokenize (preprocess, tokenize, eval): the
// type and its files, and the tokenizer they make.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "core/error.hpp"
#include "data/tokenizer.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/suggest.hpp"

namespace megatron::cli {

struct TokenizerArgs {
  std::string type;
  data::TokenizerFiles files;

  void add_to(CLI::App* cmd, bool required) {
    auto* opt = cmd->add_option("--tokenizer,--tokenizer-type", type,
                                "gpt2-bpe, bert-wordpiece-lowercase, bert-wordpiece-cased or "
                                "sentencepiece (Megatron-LM's names are accepted too)");
    if (required) opt->required();
    cmd->add_option("--vocab-file", files.vocab_file, "vocab.json (GPT-2) or vocab.txt (BERT)");
    cmd->add_option("--merge-file", files.merge_file, "merges.txt (GPT-2)");
    cmd->add_option("--tokenizer-model", files.tokenizer_model, "SentencePiece .model file");
  }

  std::unique_ptr<data::Tokenizer> load() const {
    const auto kind = recipe::parse_enum<recipe::Tokenizer>(type);
    if (!kind) {
      auto names = recipe::canonical_names<recipe::Tokenizer>();
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw UserError("unknown tokenizer '" + type + "'" + recipe::did_you_mean(type, names) +
                      "; choose one of " + list);
    }
    return data::make_tokenizer(*kind, files);
  }
};

}  // namespace megatron::cli
