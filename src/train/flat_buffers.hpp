// Every weight and every gradient of a rank's model in two flat buffers (each Parameter's value
// and grad a view into them), cut into buckets: data-parallel reduction and the distributed
// optimizer's gather are then a few large in-place collectives, issued bucket by bucket.
#pragma once

#include <cstdint>
#include <vector>

#include "model/parameter.hpp"

namespace megatron::train {

class FlatBuffers {
 public:
  // Parameters [first_param, next bucket's first_param) at [begin, end) of the buffers; end -
  // begin is a multiple of the data-parallel size times 64, so each rank owns an equal slice
  // starting on a 64-element boundary, as every parameter does (padding between them is zero).
  struct Bucket {
    int64_t begin, end;
    size_t first_param;
  };
  struct Range {  // one parameter within the buffers
    model::Parameter* param;
    int64_t begin, end;
  };

  // Moves every parameter's value and grad into the buffers, in parameter order (values kept).
  // Buckets hold at least `bucket_elements` each, counted from the last parameter: backward
  // completes gradients in about reverse creation order, so the last bucket fills first.
  FlatBuffers(tensor::Backend& backend, model::ParameterSet& params, int64_t shards,
              int64_t bucket_elements);

  tensor::Tensor& grads() { return grads_; }      // f32
  tensor::Tensor& weights() { return weights_; }  // the model's dtype
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<Range>& ranges() const { return ranges_; }
  // Rank `shard`'s slice [begin, end) of bucket b.
  std::pair<int64_t, int64_t> slice(const Bucket& b, int64_t shard) const;

 private:
  tensor::Tensor grads_, weights_;
  int64_t shards_;
  std::vector<Bucket> buckets_;
  std::vector<Range> ranges_;
};

}  // namespace megatron::train
