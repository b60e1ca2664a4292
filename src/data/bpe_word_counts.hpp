// The first half of BPE training: every distinct word (GPT-2 pre-token) of a JSONL corpus and
// how often it occurs, streamed so that memory grows with the distinct words only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

struct WordCount {
  std::string word;  // raw bytes of one pre-token, e.g. " the"
  int64_t count = 0;

  bool operator==(const WordCount&) const = default;
};

struct WordCountOptions {
  std::vector<std::string> inputs;  // .jsonl, .jsonl.gz or .jsonl.zst, read in this order
  std::string json_key = "text";    // each line is a JSON object with a string under this key
  int workers = 1;                  // threads that parse and pre-tokenize; each keeps its own
                                    // counts, so memory is at most workers x distinct words
  int64_t batch_bytes = 1 << 20;    // input bytes per unit of work
};

struct WordCountProgress {
  int64_t documents = 0;
  uint64_t input_bytes = 0;  // consumed so far (compressed bytes for compressed input)
  uint64_t input_size = 0;   // all inputs together
  double seconds = 0;
};

struct WordCountSummary : WordCountProgress {
  std::vector<WordCount> words;  // distinct words, sorted by their bytes
  int64_t total_words = 0;       // the sum of the counts
};

// Pre-tokenizes the text of every line with GPT-2's pre-tokenizer and counts the words; blank
// lines are skipped. The result does not depend on `workers`. Throws UserError for a missing
// input and for the first bad line in input order ("corpus.jsonl:12: no key 'text'").
// `progress`, when given, is called from the calling thread about twice a second.
WordCountSummary count_words(const WordCountOptions& options,
                             const std::function<void(const WordCountProgress&)>& progress = {});

// The words of one text, counted and sorted as count_words does; for tests and small inputs.
std::vector<WordCount> count_words_in_text(std::string_view text);

}  // namespace megatron::data
