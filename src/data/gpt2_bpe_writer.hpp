// Writes a trained byte-level BPE vocabulary as GPT-2's vocab.json and merges.txt, the pair of
// files that load_gpt2_bpe, OpenAI's encoder.py and Hugging Face tokenizers all read.
#pragma once

#include <string>

#include "data/bpe_trainer.hpp"

namespace megatron::data {

struct Gpt2BpeFiles {
  std::string vocab_json;  // {"!": 0, ...}: each token spelt with gpt2_spell_bytes, by id
  std::string merges_txt;  // "#version: 0.2", then "left right" per merge, best first
  int64_t vocab_size = 0;  // vocabulary.tokens.size() + 1: "<|endoftext|>" takes the last id
};

// Writes `dir`/vocab.json and `dir`/merges.txt, creating `dir` when needed. Each file is
// written under a temporary name and renamed into place only once both are complete, so a
// failure leaves no partial file. Throws UserError when either file exists and `overwrite` is
// false, and RuntimeFailure naming the path when writing fails.
// Throws the UserError write_gpt2_bpe would throw for an existing file or a `dir` that is a
// file, so that a caller can refuse before a long training run.
void check_gpt2_bpe_destination(const std::string& dir, bool overwrite);

Gpt2BpeFiles write_gpt2_bpe(const BpeVocabulary& vocabulary, const std::string& dir,
                            bool overwrite);

}  // namespace megatron::data
