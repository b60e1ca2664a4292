// Text generation from a causal language model with a key/value cache, Megatron's static loop:
// the prompts of a batch are prefilled up to the shortest one, then every sequence advances one
// position per step, taking its own prompt's token while it has one and a sampled token after;
// a sequence stops at its length limit, on end-of-document, on a stop token or on a stop string.
// The loop is generate::decode (decode_loop.hpp); what is generate's own is the cached step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"
#include "generate/sampling.hpp"
#include "model/language_model.hpp"

namespace megatron::generate {

struct GenerateOptions {
  int64_t max_tokens = 64;  // generated tokens per prompt at most (0: score the prompt only)
  Sampling sampling;
  // Megatron's top_p_decay / top_p_bound: after each step top_p = max(top_p * decay, bound).
  double top_p_decay = 0.0;
  double top_p_bound = 0.0;
  uint64_t seed = 0;
  std::optional<int32_t> eod;  // stops a sequence when generated (and is not part of its text)
  std::vector<int32_t> end_tokens;   // more tokens that do what eod does
  std::vector<int32_t> stop_tokens;  // more tokens that stop a sequence (kept in its text)
  std::vector<std::string> stop;     // strings that stop a sequence (cut from its text)
  bool logprobs = false;             // log-probability of every token after the first
  int64_t top_logprobs = 0;          // and the n most likely tokens at each such position
  // Asked once per step on every rank (collective where it must agree across them): true stops
  // every sequence where it is, "cancelled" (the client has gone).
  std::function<bool()> cancelled;
};

struct Generated {
  std::vector<int32_t> tokens;  // the prompt's, then the generated ones
  int64_t prompt_tokens = 0;
  std::string text;  // the generated tokens' text (cut before a stop string)
  // With logprobs: for tokens[1..], the log-probability of each given what precedes it.
  std::vector<double> logprobs;
  std::vector<std::vector<std::pair<int32_t, double>>> top_logprobs;  // likewise
  std::string finish_reason;  // "length", "stop" or "cancelled"
};

struct GenerateStats {
  int64_t prefill_tokens = 0;
  double prefill_s = 0.0;
  int64_t decode_steps = 0;  // one position of every sequence each
  int64_t decode_tokens = 0;  // sampled tokens
  double decode_s = 0.0;
  // The largest key/value cache a call held: its bytes on this rank, for how many sequences
  // and positions (megatron plan's kv_cache_bytes_per_token x sequences x positions).
  int64_t kv_cache_bytes = 0;
  int64_t kv_cache_sequences = 0;
  int64_t kv_cache_positions = 0;
};

// What the checkpoint's recipe says generation does unless told otherwise (its generation
// section, a Hugging Face import's generation_config.json): the sampling when a command or
// request names none, and the tokens that end a sequence besides end-of-document.
struct GenerationDefaults {
  std::optional<Sampling> sampling;
  std::vector<int32_t> end_tokens;
};

struct Engine {
  tensor::Backend& backend;
  const model::LanguageModel& model;
  const data::Tokenizer& tokenizer;
  int64_t max_positions = 0;  // the model's
  int64_t vocab = 0;          // logits columns (the tokenizer's vocabulary, no padding)
  GenerationDefaults defaults;
};

// Called after each step for each sequence that gained a token: (index in the batch, its
// generated text so far).
using OnText = std::function<void(size_t, const std::string&)>;

// Every prompt non-empty and shorter than the model's positions (checked by the caller; throws
// std::invalid_argument otherwise). Collective over the model's tensor-parallel ranks, which
// all return the same.
std::vector<Generated> generate(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& options, const OnText& on_text = {},
                                GenerateStats* stats = nullptr);

}  // namespace megatron::generate
