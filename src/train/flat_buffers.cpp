#include "train/flat_buffers.hpp"

namespace megatron::train {

FlatBuffers::FlatBuffers(tensor::Backend& backend, model::ParameterSet& params, int64_t shards)
    : shards_(shards) {
  int64_t total = 0;
  for (const auto& p : params.all()) {
    ranges_.push_back({p.get(), total, total + p->grad.numel()});
    total += p->grad.numel();
  }
  const int64_t padded = std::max<int64_t>((total + shards - 1) / shards * shards, shards);
  const tensor::DType dtype = params.all().empty() ? tensor::DType::F32
                                                   : params.all().front()->value.dtype();
  grads_ = backend.zeros({padded}, tensor::DType::F32);
  weights_ = backend.zeros({padded}, dtype);
  for (const Range& r : ranges_) {
    model::Parameter& p = *r.param;
    tensor::Tensor value = weights_.slice(r.begin, r.end).view(p.value.shape());
    backend.copy(p.value, value);
    p.value = value;
    p.grad = grads_.slice(r.begin, r.end).view(p.grad.shape());
  }
}

}  // namespace megatron::train
