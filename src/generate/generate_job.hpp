// `megatron generate` as a call: one prompt whose continuation streams to standard output as it
// grows, or a jsonl file of prompts answered a batch at a time, one jsonl line per prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.hpp"
#include "generate/generator.hpp"
#include "generate/sampling.hpp"

namespace megatron::generate {

struct GenerateJob {
  std::string prompt;            // one prompt, streamed; or
  std::string prompts;           // a jsonl file of them
  std::string field = "prompt";  // the prompts file's field holding each prompt
  std::string output;            // with prompts: the jsonl results (empty: standard output)
  int64_t max_tokens = 64;       // per prompt, at most
  Sampling sampling;
  uint64_t seed = 1234;  // batch b of the prompts file draws from seed + its first index
  std::vector<std::string> stop;
  bool ignore_eod = false;  // keep generating past the end-of-document token
  bool add_bos = false;     // start each prompt with the end-of-document token
  bool logprobs = false;
  int64_t batch_size = 8;  // prompts file: prompts generated together
  // Each prompt a user turn of this chat template, followed by the assistant's header, as
  // transformers' apply_chat_template(add_generation_prompt=True) writes it (and then encodes it:
  // without the tokenizer's own leading tokens).
  std::optional<data::ChatTemplate> chat_template;
};

// The prompts' texts, with the output's directory made ready: everything about the job's input
// that can be wrong, checked on the launching process before a job of several ranks starts.
// UserError for neither or both of prompt and prompts, an output that is the prompts file, an
// unreadable or empty prompts file, or a prompt without `field`.
std::vector<std::string> read_prompts(const GenerateJob& job);

// Generates for `texts` (from read_prompts) on every rank of the engine's model; rank 0 writes
// the text or jsonl and logs the throughput. UserError for a prompt that is empty or does not
// fit the model's positions; RuntimeFailure when the output cannot be written (the partial file
// is removed).
void generate_text(const GenerateJob& job, const std::vector<std::string>& texts,
                   const Engine& engine, bool rank0, const std::string& description);

// The bytes at the end of `text` that are an unfinished UTF-8 character, held back from the
// stream until the character is whole.
size_t unfinished_utf8(std::string_view text);

}  // namespace megatron::generate
