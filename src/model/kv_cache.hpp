// Generation's key/value cache: for each transformer block this rank holds, the keys and values
// of every position so far of each sequence in the batch, sharded by key/value group under
// tensor parallelism as the attention is.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace megatron::model {

struct LayerCache {
  tensor::Tensor k, v;  // [batch, groups / tp, capacity, head_dim], the model's dtype
};

// Continuous batching's step (LanguageModel::decode_paged): row r is a token at position
// positions[r] of the sequence whose pool blocks are row r of block_tables; the pool is a KvCache
// whose "batch" is the blocks and whose "capacity" is the block size.
struct PagedRows {
  std::vector<int32_t> positions;     // [rows]
  std::vector<int32_t> block_tables;  // [rows, max_blocks]
  int64_t max_blocks = 0;
  // The same on the backend, made by decode_paged.
  tensor::Tensor device_positions, device_tables;
};

struct KvCache {
  int64_t batch = 0;
  int64_t capacity = 0;  // positions per sequence
  std::vector<LayerCache> layers;  // one per block of this rank, in model order
};

}  // namespace megatron::model
