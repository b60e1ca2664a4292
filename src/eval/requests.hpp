// How a task's text becomes scoring requests, following lm-evaluation-harness (context and
// continuation tokenization, rolling windows over a document) and Megatron's tasks/ (overlapping
// windows over a corpus).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"
#include "eval/scorer.hpp"

namespace megatron::eval {

// lm-evaluation-harness's _encode_pair: trailing spaces of the context move onto the
// continuation; context + continuation is encoded whole and the continuation is what follows
// the context's own encoding. An empty context becomes `prefix_token` (end of document).
Request encode_pair(const data::Tokenizer& tokenizer, std::string context, std::string continuation,
                    int32_t prefix_token);

// lm-evaluation-harness's loglikelihood_rolling: disjoint windows of up to max_length predicted
// tokens, each with the full max_length of context before it (the first after `prefix_token`).
// The windows' log-probabilities sum to the document's.
std::vector<Request> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                     int64_t max_length);

// Megatron's overlapping evaluation (tasks/zeroshot_gpt): windows of seq_length targets every
// `stride` tokens; the first scores all of its targets, each later one only its last `stride`,
// so every token after the first is scored once, with at least seq_length - stride of context.
std::vector<Request> overlapping_windows(const std::vector<int32_t>& tokens, int64_t seq_length,
                                         int64_t stride);

}  // namespace megatron::eval
