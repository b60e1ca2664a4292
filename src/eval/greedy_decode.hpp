// Generation through the model's ordinary forward pass, greedy or sampled, for generation-based
// evaluation on any layout: GPT continues each prompt, T5 decodes each source from [BOS].
#pragma once

#include <cstdint>
#include <vector>

#include "eval/scorer.hpp"
#include "generate/sampling.hpp"

namespace megatron::eval {

struct DecodeOptions {
  int64_t max_tokens = 32;  // generated tokens per prompt at most
  // GPT: the model's positions; a prompt keeps its last max_length - max_tokens tokens.
  // T5: the decoder's positions (max_tokens + 1 at most).
  int64_t max_length = 0;
  int64_t encoder_length = 0;  // T5: a source keeps its first encoder_length tokens
  bool encoder_decoder = false;
  int32_t bos = 0;                   // T5: the decoder's first input
  int32_t pad = 0;                   // fills short sequences
  std::vector<int32_t> stop_tokens;  // end a sequence (not part of its output)
  int64_t batch_size = 1;
  int64_t vocab_size = 0;  // argmax over these columns (model.vocab_size)
  // Greedy by default (top_k 1). Otherwise each prompt draws from its own generator, seeded with
  // seed + its index, so an output does not depend on the batch it falls in.
  generate::Sampling sampling{.top_k = 1};
  uint64_t seed = 0;
};

// Each prompt's generated tokens (without the stop token), in prompt order, on every rank.
// The loop is `megatron generate`'s (generate::decode); its step here runs the whole model over
// every position (no key/value cache): slower than `megatron generate` by about the output
// length, and it runs wherever the model runs (tensor, pipeline and data-parallel layouts). The argmax is torch.argmax's (the first column
// of the largest logit, over the tensor-parallel shards in order); a draw sees the whole
// vocabulary's logits, gathered from the shards, as `megatron generate` draws. Data-parallel
// replicas take the batches in turn, as the scorer's do, and share their outputs at the end.
// Collective over the groups.
std::vector<std::vector<int32_t>> greedy_decode(const ForwardFn& forward, tensor::Backend& backend,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const DecodeOptions& options,
                                                const ScoreProgress& progress = {},
                                                const ScoreGroups& groups = {});

}  // namespace megatron::eval
