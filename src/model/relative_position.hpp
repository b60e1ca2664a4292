// T5's relative position bias (Megatron-Core's RelativePositionEmbedding, Hugging Face's
// T5Attention.relative_attention_bias): a learned [buckets, heads] table whose entry for
// bucket(j - i) is added to the score of query i and key j in every self-attention of a stack.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/model_config.hpp"
#include "model/parameter.hpp"

namespace megatron::model {

// The bucket of key position minus query position: exact below half the (per-direction)
// buckets, logarithmic up to max_distance, then the last; the encoder's buckets are split
// between looking ahead and behind, the decoder's only look behind. Computed as the reference
// implementations do, in float32.
int64_t relative_bucket(int64_t relative_position, bool bidirectional, int64_t buckets,
                        int64_t max_distance);

class RelativePositionBias {
 public:
  // `name`: the table's parameter name; its heads are split across tensor-parallel ranks.
  RelativePositionBias(ParameterSet& params, const ModelConfig& config, const std::string& name,
                       bool bidirectional);
  // f32 [seq * seq, this rank's heads]: row i * seq + j holds each head's bias of (i, j).
  tensor::Tensor forward(tensor::Backend& backend, int64_t seq) const;
  // Adds dbias (f32, forward's shape) into the table's gradient.
  void backward(tensor::Backend& backend, int64_t seq, const tensor::Tensor& dbias) const;

 private:
  const tensor::Tensor& buckets(tensor::Backend& backend, int64_t seq) const;

  const ModelConfig& config_;
  bool bidirectional_;
  Parameter& table_;
  mutable std::map<int64_t, tensor::Tensor> buckets_;  // i32 [seq * seq] per sequence length
};

}  // namespace megatron::model
