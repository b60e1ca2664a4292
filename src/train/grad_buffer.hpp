// Every gradient of a rank's model in one flat f32 buffer (each Parameter::grad a view into it),
// so that data-parallel reduction is a few large collectives instead of one per tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "model/parameter.hpp"

namespace megatron::train {

class GradBuffer {
 public:
  // Re-points every parameter's grad into the buffer, in parameter order. The buffer is padded
  // to a multiple of `shards` elements so that it splits evenly across data-parallel ranks.
  GradBuffer(tensor::Backend& backend, model::ParameterSet& params, int64_t shards);

  tensor::Tensor& flat() { return flat_; }
  int64_t shard_size() const { return flat_.numel() / shards_; }
  // [begin, end) of each parameter within the buffer, in parameter order.
  struct Range {
    model::Parameter* param;
    int64_t begin, end;
  };
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  tensor::Tensor flat_;
  int64_t shards_;
  std::vector<Range> ranges_;
};

}  // namespace megatron::train
