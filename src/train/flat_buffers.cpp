#include "train/flat_buffers.hpp"

#include <algorithm>

namespace megatron::train {
namespace {

// Every parameter, and every rank's slice of a bucket, starts on a multiple of this many
// elements (256 bytes of f32 gradients): GEMMs, vectorised kernels and NCCL then see aligned
// addresses, as Megatron pads its buffers to multiples of 128 x data-parallel size.
constexpr int64_t kAlign = 64;

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

}  // namespace

FlatBuffers::FlatBuffers(tensor::Backend& backend, model::ParameterSet& params, int64_t shards,
                         int64_t bucket_elements)
    : shards_(shards) {
  const auto& all = params.all();
  // Which parameters start a bucket, scanning from the last.
  std::vector<size_t> starts;
  int64_t filled = 0;
  for (size_t i = all.size(); i-- > 0;) {
    filled += all[i]->grad.numel();
    if (filled >= bucket_elements || i == 0) {
      starts.push_back(i);
      filled = 0;
    }
  }
  std::reverse(starts.begin(), starts.end());
  int64_t offset = 0;
  for (size_t b = 0; b < starts.size(); ++b) {
    const size_t last = b + 1 < starts.size() ? starts[b + 1] : all.size();
    const int64_t begin = offset;
    for (size_t i = starts[b]; i < last; ++i) {
      ranges_.push_back({all[i].get(), offset, offset + all[i]->grad.numel()});
      offset = round_up(offset + all[i]->grad.numel(), kAlign);
    }
    offset = begin + std::max<int64_t>(round_up(offset - begin, shards * kAlign), shards * kAlign);
    buckets_.push_back({begin, offset, starts[b]});
  }
  const tensor::DType dtype = all.empty() ? tensor::DType::F32 : all.front()->value.dtype();
  grads_ = backend.zeros({std::max<int64_t>(offset, 1)}, tensor::DType::F32);
  weights_ = backend.zeros({std::max<int64_t>(offset, 1)}, dtype);
  for (const Range& r : ranges_) {
    model::Parameter& p = *r.param;
    tensor::Tensor value = weights_.slice(r.begin, r.end).view(p.value.shape());
    backend.copy(p.value, value);
    p.value = value;
    p.grad = grads_.slice(r.begin, r.end).view(p.grad.shape());
  }
}

std::pair<int64_t, int64_t> FlatBuffers::slice(const Bucket& b, int64_t shard) const {
  const int64_t size = (b.end - b.begin) / shards_;
  return {b.begin + shard * size, b.begin + (shard + 1) * size};
}

}  // namespace megatron::train
