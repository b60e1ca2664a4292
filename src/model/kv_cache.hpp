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

struct KvCache {
  int64_t batch = 0;
  int64_t capacity = 0;  // positions per sequence
  std::vector<LayerCache> layers;  // one per block of this rank, in model order
};

}  // namespace megatron::model
