// `megatron tokenize` as a call: each line of a JSONL file tokenized, written as one JSON object
// of ids (and, when asked, each token's text) per line.
#pragma once

#include <string>

#include "data/tokenizer.hpp"

namespace megatron::data {

struct TokenizeJob {
  std::string input;         // JSONL
  std::string output;        // JSONL; empty: standard output
  std::string key = "text";  // the field holding each line's text
  bool show_tokens = false;  // also each token's text, under "tokens"
};

// Blank lines are skipped. UserError ("FILE:LINE: ...") for a line that is not JSON or has no
// string under `key`, and for an output it cannot write.
void tokenize_jsonl(const TokenizeJob& job, const Tokenizer& tokenizer);

}  // namespace megatron::data
