// `megatron preprocess` as a call: a JSONL corpus tokenized into indexed datasets, with the
// progress line on standard error and the summary a user reads on standard output.
#pragma once

#include "data/preprocess.hpp"
#include "data/tokenizer.hpp"

namespace megatron::data {

struct PreprocessJob {
  PreprocessOptions options;
  bool quiet = false;  // no progress line
};

// Runs preprocess() and prints its summary and the datasets it wrote; errors as preprocess().
void run_preprocess(const PreprocessJob& job, const Tokenizer& tokenizer);

}  // namespace megatron::data
