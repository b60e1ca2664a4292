#include "train/grad_buffer.hpp"

namespace megatron::train {

GradBuffer::GradBuffer(tensor::Backend& backend, model::ParameterSet& params, int64_t shards)
    : shards_(shards) {
  int64_t total = 0;
  for (const auto& p : params.all()) {
    ranges_.push_back({p.get(), total, total + p->grad.numel()});
    total += p->grad.numel();
  }
  const int64_t padded = (total + shards - 1) / shards * shards;
  flat_ = backend.zeros({std::max<int64_t>(padded, shards)}, tensor::DType::F32);
  for (const Range& r : ranges_) {
    r.param->grad = flat_.slice(r.begin, r.end).view(r.param->grad.shape());
  }
}

}  // namespace megatron::train
