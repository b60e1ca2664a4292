// `megatron serve`'s continuous-batching defaults, which the plan costs and the server starts
// with: key/value blocks of kServeBlockSize positions, a pool for kServeSequences sequences of the
// model's positions, and at most kServeStepTokens rows per step.
#pragma once

#include <cstdint>

namespace megatron::plan {

constexpr int64_t kServeBlockSize = 16;
constexpr int64_t kServeSequences = 32;
constexpr int64_t kServeStepTokens = 256;

// Blocks a sequence of `positions` holds.
constexpr int64_t serve_blocks(int64_t positions, int64_t block_size = kServeBlockSize) {
  return (positions + block_size - 1) / block_size;
}

}  // namespace megatron::plan
