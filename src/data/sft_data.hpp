// Supervised fine-tuning data for GPT: prompt/response pairs and chat transcripts read from jsonl
// (checked where they enter), tokenised with per-token "scored" flags, and served as samples of
// S + 1 tokens whose loss covers the responses (the assistant turns) only, one example a sample or
// several packed into one with attention and positions kept within each example.
//
// Glossary: S sequence length; a window is the S + 1 tokens a sample is made from.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/sample.hpp"
#include "data/tokenizer.hpp"

namespace megatron::data {

struct SftFields {
  std::string prompt = "prompt";
  std::string response = "response";
  std::string messages = "messages";  // chat: an array of {"role", "content"}
};

// Each non-blank line an object with string fields `fields.prompt` and `fields.response`. A
// missing field, a value that is not a string, a line that is not an object or a file without
// examples is a UserError naming file:line and the field.
std::vector<SftExample> read_prompt_response_jsonl(const std::string& path,
                                                   const SftFields& fields = {});

// Each non-blank line an object whose field `fields.messages` is a non-empty array of
// {"role": "system" | "user" | "assistant", "content": string} with at least one assistant
// turn, rendered by render_chat. Anything else is a UserError naming file:line and the field
// (e.g. "messages[2].role").
std::vector<SftExample> read_chat_jsonl(const std::string& path, const SftFields& fields,
                                        ChatTemplate chat_template);

// tokens and scored have the same length.
struct TokenizedExample {
  std::vector<int32_t> tokens;
  std::vector<bool> scored;
};

// Each segment encoded on its own (so a token never straddles a scored boundary) and the ids
// concatenated, then `eod` appended, scored: the model learns to stop.
TokenizedExample tokenize_example(const SftExample& example, const Tokenizer& tokenizer,
                                  int32_t eod);

// What the log reports about a set of examples (after cutting). An example's first token is
// never a label (nothing before it in the example predicts it), so `scored_tokens` counts the
// scored tokens after each example's first, and an example is `unscored` when it has none.
struct SftStats {
  int64_t examples = 0;
  int64_t cut = 0;       // examples longer than S + 1 tokens, cut to their first S + 1
  int64_t unscored = 0;  // examples left with no scored label: they train nothing
  int64_t tokens = 0;
  int64_t scored_tokens = 0;
};

// Cuts every example longer than seq_length + 1 tokens to its first seq_length + 1 (in place)
// and returns the counts. Cutting again changes nothing (and counts no cut).
SftStats cut_examples(std::vector<TokenizedExample>& examples, int64_t seq_length);

// The examples as `size` GPT samples, epoch after epoch: each epoch the examples in order, or a
// permutation drawn from (seed, epoch) when `shuffle` (ClassificationSource's draws); then
//  - without `pack`: one example a sample, its window padded with `eod`; document_starts empty
//    (plain causal attention: the padding sees the example, which does not matter, as nothing
//    after the example is scored);
//  - with `pack`: the epoch's examples walked in order, a new sample started when the next
//    example does not fit in the S + 1 positions left; the window padded with `eod`, and the
//    padding (when it starts before position S) is a segment of its own.
// Every sample: tokens = window[0..S), labels = window[1..S]; loss_mask[i] = 1 iff window[i + 1]
// is scored and belongs to the same example as window[i] (never across examples, never on
// padding); position_ids restart at 0 at each segment's first token (an example, or the
// padding); with `pack`, document_starts lists those first positions (0 first), so attention
// stays within an example. Samples of consecutive epochs follow each other; sample(i) is a pure
// function of i (every sample's examples are decided in the constructor).
class SftSource : public SampleSource {
 public:
  // `examples` longer than S + 1 are cut here (see cut_examples; passing them already cut is
  // fine). Throws UserError for no examples or a seq_length below 1.
  SftSource(std::vector<TokenizedExample> examples, int64_t seq_length, bool pack, uint64_t seed,
            int64_t size, bool shuffle, int32_t eod);
  int64_t size() const override { return size_; }
  Sample sample(int64_t i) const override;

  // The indices (into the examples given) of the examples sample i holds, in window order.
  std::span<const int32_t> examples_of(int64_t i) const;
  // Samples in the first epoch (with packing and shuffling, later epochs may pack into a few
  // more or fewer).
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  const SftStats& stats() const { return stats_; }

 private:
  std::vector<TokenizedExample> examples_;
  int64_t seq_length_ = 0;
  bool pack_ = false;
  int64_t size_ = 0;
  int32_t eod_ = 0;
  SftStats stats_;
  int64_t samples_per_epoch_ = 0;
  // Sample i holds members_[offsets_[i] .. offsets_[i + 1]).
  std::vector<int32_t> members_;
  std::vector<int64_t> offsets_;
};

}  // namespace megatron::data
