// Splits text into sentences for `megatron preprocess --split-sentences` (BERT-style data).
// A rule-based approximation of NLTK's English Punkt model, which Megatron-LM uses.
#pragma once

#include <string_view>
#include <vector>

namespace megatron::data {

// Sentences of `text` as views into it, surrounding whitespace trimmed. A sentence ends at
// . ! or ? (with any closing quotes or brackets after it) followed by whitespace, unless the
// word before the period is a known abbreviation or a single-letter initial, or the next word
// starts with a lowercase letter (Punkt's orthographic heuristic). With `keep_newlines`
// a newline also ends a sentence, as Megatron's --keep-newlines does.
std::vector<std::string_view> split_sentences(std::string_view text, bool keep_newlines = false);

}  // namespace megatron::data
