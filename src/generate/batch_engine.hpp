// Continuous batching (Megatron-Core's dynamic engine, vLLM): requests join and leave the running
// batch at every step; each step runs one token of every decoding sequence and chunks of the
// prompts being read, so decoding keeps flowing while long prompts arrive; keys and values live in
// fixed-size blocks of one pool, a sequence holding the blocks its prompt and tokens can reach.
// Each sequence samples with its own settings and generator (its request's seed + its index), so
// its tokens do not depend on what else runs. Every rank of a tensor-parallel model runs the same
// steps (the adds and cancels are rank 0's, handed to the others).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "generate/decode_loop.hpp"
#include "generate/generator.hpp"
#include "model/kv_cache.hpp"
#include "plan/serving.hpp"

namespace megatron::generate {

struct BatchOptions {
  int64_t block_size = plan::kServeBlockSize;      // positions per key/value block
  int64_t blocks = 0;                              // the pool
  int64_t max_sequences = plan::kServeSequences;   // running at once
  int64_t step_tokens = plan::kServeStepTokens;    // rows per step at most: one per decoding
                                                   // sequence, then prompt chunks
};

// One request: its prompts (each a sequence), how to generate them, and (rank 0) a listener for
// the text as it grows.
struct BatchRequest {
  std::vector<std::vector<int32_t>> prompts;
  GenerateOptions options;
  OnText on_text;
};

struct Finished {
  int64_t id = 0;
  std::vector<Generated> results;  // finish_reason "cancelled" for every one when cancelled
};

class BatchEngine {
 public:
  BatchEngine(const Engine& engine, BatchOptions options);
  ~BatchEngine();

  // The blocks a request holds while it runs.
  int64_t blocks_for(const BatchRequest& request) const;
  // Queues it, to start when blocks and room free up, in arrival order. std::invalid_argument
  // when it could never fit (more blocks or sequences than there are).
  void add(int64_t id, BatchRequest request);
  // Ends it, queued or running: the next step returns it.
  void cancel(int64_t id);
  // Starts what fits, runs one step of the model, and returns the requests that ended.
  std::vector<Finished> step();

  bool idle() const;
  int64_t waiting() const;
  int64_t running() const;  // requests
  int64_t blocks() const;
  int64_t blocks_used() const;
  int64_t pool_bytes() const;
  // Tokens chosen so far, over all requests.
  int64_t generated() const;

 private:
  struct Request;
  const Engine& e_;
  BatchOptions o_;
  model::KvCache pool_;
  std::vector<int32_t> free_;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;
  std::vector<Finished> ended_;  // cancelled since the last step
  int64_t generated_ = 0;
};

}  // namespace megatron::generate
