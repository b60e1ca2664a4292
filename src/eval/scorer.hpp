// Scores continuations with a causal language model: for each request, the log-probability of
// its continuation tokens after its context, and whether each was the model's greedy choice.
// The unit every evaluation task is built from (lm-evaluation-harness's `loglikelihood`).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dist/communicator.hpp"
#include "model/language_model.hpp"

namespace megatron::eval {

struct Request {
  std::vector<int32_t> context;       // may be empty only when continuation has 2+ tokens
  std::vector<int32_t> continuation;  // at least one token
};

struct Score {
  double logprob = 0.0;  // sum over the continuation's tokens
  bool greedy = true;    // every continuation token was the argmax (when asked for)
  int64_t tokens = 0;    // continuation tokens scored
};

struct ScorerOptions {
  int64_t max_length = 0;   // the model's longest sequence: context is cut from the left to fit
  int64_t batch_size = 1;   // sequences per forward pass
  int32_t pad_token = 0;    // fills short sequences (causal: it never influences a real token)
  int64_t vocab_size = 0;   // model.vocab_size: log-softmax and argmax over these columns only
  bool greedy = true;       // find each token's argmax (Score::greedy); perplexity needs none
};

// How a job's ranks share the work: data-parallel replicas take the batches in turn; the
// pipeline stages and tensor-parallel ranks of a replica all run each of its batches, the last
// stage's tensor-parallel peers each holding a vocabulary shard. Null groups: one process.
struct ScoreGroups {
  dist::Communicator* tp = nullptr;     // the tensor-parallel peers (their vocabulary shards)
  dist::Communicator* dp = nullptr;     // the replicas (this one is its rank)
  dist::Communicator* world = nullptr;  // every rank: each learns every score over it
  dist::Communicator* replica = nullptr;  // the tensor- and pipeline-parallel ranks of this replica
  bool reports = true;  // this rank speaks for its replica: the last stage's tensor-parallel rank 0
};

// Runs the model on a batch (every rank of a replica calls it); fills `outputs` and returns true
// on the ranks that end the model (the last pipeline stage).
using ForwardFn = std::function<bool(const model::Batch&, model::HeadOutputs& outputs)>;

// Each scored row's largest logit and its vocabulary column, as pairs [value, column, ...], over
// the whole vocabulary: the first column holding the largest value (torch.argmax's choice), the
// tensor-parallel shards taken in column order (collective over `tp`; null: one shard).
std::vector<float> argmax_over_shards(tensor::Backend& backend, const model::HeadOutputs& outputs,
                                      dist::Communicator* tp);

// Progress: (requests done, requests in all).
using ScoreProgress = std::function<void(int64_t, int64_t)>;

// Scores every request with the model `forward` runs; results in request order, on every rank. Only the
// continuation's positions get logits; log-probabilities come from the backend's f32
// cross-entropy over the model's vocabulary (Megatron's padding columns excluded, as a Hugging Face
// model has none) and are summed in double. Batches do not depend on the layout, so neither do
// the scores (but for the f32 reduction order of tensor-parallel layers). Collective over the
// groups' ranks.
std::vector<Score> score(const ForwardFn& forward, tensor::Backend& backend,
                         const std::vector<Request>& requests, const ScorerOptions& options,
                         const ScoreProgress& progress = {}, const ScoreGroups& groups = {});

}  // namespace megatron::eval
