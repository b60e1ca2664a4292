// Every weight and every gradient of a rank's model in two flat buffers (each Parameter's value
// and grad a view into them), so that data-parallel reduction and the distributed optimizer's
// gather are a few large in-place collectives instead of one per tensor and no staging copies.
#pragma once

#include <cstdint>
#include <vector>

#include "model/parameter.hpp"

namespace megatron::train {

class FlatBuffers {
 public:
  // Moves every parameter's value and grad into the buffers, in parameter order (values kept).
  // Both are padded to a multiple of `shards` elements, to split evenly across data-parallel
  // ranks.
  FlatBuffers(tensor::Backend& backend, model::ParameterSet& params, int64_t shards);

  tensor::Tensor& grads() { return grads_; }      // f32
  tensor::Tensor& weights() { return weights_; }  // the model's dtype
  int64_t shard_size() const { return grads_.numel() / shards_; }
  // [begin, end) of each parameter within the buffers, in parameter order.
  struct Range {
    model::Parameter* param;
    int64_t begin, end;
  };
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  tensor::Tensor grads_, weights_;
  int64_t shards_;
  std::vector<Range> ranges_;
};

}  // namespace megatron::train
