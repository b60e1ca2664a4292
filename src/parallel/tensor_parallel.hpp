// Tensor (and sequence) parallelism as the layers see it: which shard of the heads, FFN and
// vocabulary this rank holds, and the two collectives that enter and leave a parallel region.
#pragma once

#include <cstdint>

#include "dist/communicator.hpp"
#include "tensor/backend.hpp"

namespace megatron::parallel {

struct TensorParallel {
  dist::Communicator* group = nullptr;  // null: one rank, every mapping is the identity
  int64_t rank = 0;
  int64_t size = 1;
  bool sequence_parallel = false;  // hidden states outside the regions hold rows / size

  bool active() const { return size > 1; }
  // [begin, end) of `n` split evenly (the recipe compiler checked divisibility).
  int64_t shard_begin(int64_t n) const { return n / size * rank; }
  int64_t shard(int64_t n) const { return n / size; }
  // Rows of the hidden states this rank holds between regions, of `rows` in the whole batch.
  int64_t local_rows(int64_t rows) const { return sequence_parallel ? rows / size : rows; }
  int64_t first_row(int64_t rows) const { return sequence_parallel ? rows / size * rank : 0; }
};

// Entering a region (input of a column-parallel layer): the whole sequence. Under sequence
// parallelism the row shards are all-gathered; otherwise x is already whole and is returned.
// Its backward is reduce_partial.
tensor::Tensor gather_sequence(tensor::Backend& backend, const TensorParallel& tp,
                               const tensor::Tensor& x);

// Leaving a region (output of a row-parallel layer, or a gradient flowing back into a
// replicated tensor): partial sums over the ranks are summed. Under sequence parallelism each
// rank keeps only its rows (reduce-scatter); otherwise all-reduce. Its backward is
// gather_sequence.
tensor::Tensor reduce_partial(tensor::Backend& backend, const TensorParallel& tp,
                              tensor::Tensor partial);

}  // namespace megatron::parallel
