// `megatron preprocess`: JSONL corpus -> Megatron indexed datasets, one per JSON key.
// Streams in constant memory; workers tokenize in parallel and output order equals input order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"

namespace megatron::data {

struct PreprocessOptions {
  std::string input;                          // .jsonl, .jsonl.gz or .jsonl.zst
  std::string output_prefix;  // writes {prefix}_{key}_document (or _sentence) .bin/.idx
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  bool split_sentences = false;               // one sequence per sentence (BERT-style data)
  bool keep_newlines = false;                 // with split_sentences: newlines end sentences
  int workers = 1;
  bool skip_bad_lines = false;
  int64_t batch_bytes = 4 << 20;              // input bytes per unit of work
};

struct PreprocessProgress {
  int64_t documents = 0;
  int64_t skipped = 0;
  int64_t tokens = 0;
  uint64_t input_bytes = 0;  // consumed so far (compressed bytes for compressed input)
  uint64_t input_size = 0;   // the whole input file
  double seconds = 0;
};

struct PreprocessSummary : PreprocessProgress {
  std::vector<std::string> outputs;  // prefixes written, one per key
};

// Throws UserError ("corpus.jsonl:12: ...") for a bad line unless skip_bad_lines, and for
// bad options; nothing is published under the final names unless every key succeeded.
// `progress`, when given, is called from the calling thread about twice a second.
PreprocessSummary preprocess(const PreprocessOptions& options, const Tokenizer& tokenizer,
                             const std::function<void(const PreprocessProgress&)>& progress = {});

}  // namespace megatron::data
