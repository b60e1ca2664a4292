#include "model/parameter.hpp"

#include <cmath>

#include "model/rng_streams.hpp"
#include "tensor/host_io.hpp"

namespace megatron::model {
namespace {

tensor::Shape local_shape(const tensor::Shape& shape, TpSplit split,
                          const parallel::TensorParallel& tp) {
  tensor::Shape local = shape;
  if (split == TpSplit::Rows) local[0] = tp.shard(shape[0]);
  if (split == TpSplit::Columns) local[1] = tp.shard(shape[1]);
  return local;
}

// This rank's shard of a whole weight (row-major [rows, cols], or a vector as [rows, 1]).
std::vector<float> take_shard(const std::vector<float>& whole, const Parameter& p,
                              const parallel::TensorParallel& tp) {
  const int64_t rows = p.global_shape[0];
  const int64_t cols = p.global_shape.size() > 1 ? p.global_shape[1] : 1;
  std::vector<float> out;
  out.reserve(size_t(p.value.numel()));
  if (p.split == TpSplit::Rows) {
    const int64_t part_rows = rows / p.parts;
    for (int64_t part = 0; part < p.parts; ++part) {
      const int64_t first = part * part_rows + tp.shard_begin(part_rows);
      const auto begin = whole.begin() + first * cols;
      out.insert(out.end(), begin, begin + tp.shard(part_rows) * cols);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const auto begin = whole.begin() + r * cols + tp.shard_begin(cols);
      out.insert(out.end(), begin, begin + tp.shard(cols));
    }
  }
  return out;
}

}  // namespace

Parameter& ParameterSet::add(std::string name, const tensor::Shape& shape, Init init,
                             TpSplit split, bool weight_decay, int64_t parts) {
  auto p = std::make_unique<Parameter>();
  const tensor::Shape local = local_shape(shape, split, tp_);
  p->name = std::move(name);
  p->value = backend_.empty(local, dtype_);
  p->grad = backend_.zeros(local, tensor::DType::F32);
  p->init = init;
  p->split = split;
  p->weight_decay = weight_decay;
  p->global_shape = shape;
  p->parts = parts;
  params_.push_back(std::move(p));
  return *params_.back();
}

int64_t ParameterSet::count() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->value.numel();
  return n;
}

void ParameterSet::zero_grads() {
  for (auto& p : params_) backend_.fill(p->grad, 0.0);
}

void ParameterSet::initialise(uint64_t seed, double std, int64_t num_layers) {
  const double scaled = std / std::sqrt(2.0 * double(num_layers));
  for (auto& p : params_) {
    switch (p->init) {
      case Init::Zeros: backend_.fill(p->value, 0.0); break;
      case Init::Ones: backend_.fill(p->value, 1.0); break;
      case Init::Normal:
      case Init::ScaledNormal: {
        // Drawn in f32 and rounded once, so every dtype starts from the same weights.
        tensor::Tensor f32 = backend_.empty(p->global_shape, tensor::DType::F32);
        backend_.normal(f32, 0.0f, float(p->init == Init::Normal ? std : scaled),
                        {.seed = seed, .stream = init_stream(p->name)});
        if (p->split != TpSplit::None && tp_.active()) {
          // The whole weight is drawn and this rank's part kept: the same numbers as one
          // process draws, whatever the layout.
          f32 = tensor::from_floats(backend_, take_shard(tensor::to_floats(backend_, f32), *p, tp_),
                                    p->value.shape(), tensor::DType::F32);
        }
        backend_.copy(f32, p->value);
        break;
      }
    }
  }
}

}  // namespace megatron::model
