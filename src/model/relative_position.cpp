#include "model/relative_position.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/host_io.hpp"

namespace megatron::model {

int64_t relative_bucket(int64_t relative_position, bool bidirectional, int64_t buckets,
                        int64_t max_distance) {
  int64_t bucket = 0;
  int64_t n = buckets;
  int64_t distance = relative_position;
  if (bidirectional) {
    n /= 2;
    if (distance > 0) bucket += n;
    distance = std::abs(distance);
  } else {
    distance = -std::min<int64_t>(distance, 0);
  }
  const int64_t max_exact = n / 2;
  if (distance < max_exact) return bucket + distance;
  // float32 as torch computes it: log(distance / max_exact) / log(max_distance / max_exact) *
  // (n - max_exact), truncated; the Python scalar log is a double rounded to float.
  const float ratio = std::log(float(distance) / float(max_exact)) /
                      float(std::log(double(max_distance) / double(max_exact)));
  const int64_t large = max_exact + int64_t(ratio * float(n - max_exact));
  return bucket + std::min(large, n - 1);
}

RelativePositionBias::RelativePositionBias(ParameterSet& params, const ModelConfig& config,
                                           const std::string& name, bool bidirectional)
    : config_(config),
      bidirectional_(bidirectional),
      table_(params.add(name, {config.relative_buckets, config.heads}, Init::Normal,
                        TpSplit::Columns, true)) {}

const tensor::Tensor& RelativePositionBias::buckets(tensor::Backend& b, int64_t seq) const {
  auto it = buckets_.find(seq);
  if (it != buckets_.end()) return it->second;
  std::vector<int32_t> ids(size_t(seq * seq));
  for (int64_t i = 0; i < seq; ++i) {
    for (int64_t j = 0; j < seq; ++j) {
      ids[size_t(i * seq + j)] = int32_t(relative_bucket(j - i, bidirectional_, config_.relative_buckets,
                                                         config_.relative_max_distance));
    }
  }
  return buckets_.emplace(seq, tensor::from_ints(b, ids, {seq * seq})).first->second;
}

tensor::Tensor RelativePositionBias::forward(tensor::Backend& b, int64_t seq) const {
  const tensor::Tensor& ids = buckets(b, seq);
  const int64_t heads = table_.value.dim(1);
  tensor::Tensor rows = b.empty({seq * seq, heads}, table_.value.dtype());
  b.embedding_forward(ids, table_.value, rows);
  if (rows.dtype() == tensor::DType::F32) return rows;
  tensor::Tensor out = b.empty(rows.shape(), tensor::DType::F32);
  b.copy(rows, out);
  return out;
}

void RelativePositionBias::backward(tensor::Backend& b, int64_t seq, const tensor::Tensor& dbias) const {
  b.embedding_backward(buckets(b, seq), dbias, table_.grad);
}

}  // namespace megatron::model
