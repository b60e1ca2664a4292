#include "model/parameter.hpp"

#include <cmath>
#include <stdexcept>

#include "model/rng_streams.hpp"

namespace megatron::model {
namespace {

tensor::Shape local_shape(const tensor::Shape& shape, TpSplit split,
                          const parallel::TensorParallel& tp) {
  tensor::Shape local = shape;
  if (split == TpSplit::Rows) local[0] = tp.shard(shape[0]);
  if (split == TpSplit::Columns) local[1] = tp.shard(shape[1]);
  return local;
}

// Draws this rank's shard of a whole weight: each run of contiguous elements of the shard with
// the whole weight's numbering (RngKey::offset), so no rank ever holds the whole weight.
void draw_shard(tensor::Backend& backend, tensor::Tensor& shard, const Parameter& p,
                const parallel::TensorParallel& tp, float std, tensor::RngKey key) {
  const int64_t rows = p.global_shape[0];
  const int64_t cols = p.global_shape.size() > 1 ? p.global_shape[1] : 1;
  tensor::Tensor flat = shard.flat();
  if (p.split == TpSplit::Rows) {
    const int64_t part_rows = rows / p.parts, local = tp.shard(part_rows);
    for (int64_t part = 0; part < p.parts; ++part) {
      tensor::Tensor piece = flat.slice(part * local * cols, (part + 1) * local * cols);
      key.offset = uint64_t((part * part_rows + tp.shard_begin(part_rows)) * cols);
      backend.normal(piece, 0.0f, std, key);
    }
  } else {
    const int64_t local = tp.shard(cols);
    for (int64_t r = 0; r < rows; ++r) {
      tensor::Tensor piece = flat.slice(r * local, (r + 1) * local);
      key.offset = uint64_t(r * cols + tp.shard_begin(cols));
      backend.normal(piece, 0.0f, std, key);
    }
  }
}

}  // namespace

Parameter& ParameterSet::add(std::string name, const tensor::Shape& shape, Init init,
                             TpSplit split, bool weight_decay, int64_t parts) {
  auto p = std::make_unique<Parameter>();
  const tensor::Shape local = local_shape(shape, split, tp_);
  p->name = std::move(name);
  if (backend_) {
    p->value = backend_->empty(local, dtype_);
    p->grad = backend_->zeros(local, tensor::DType::F32);
  }
  p->init = init;
  p->split = split;
  p->weight_decay = weight_decay;
  p->global_shape = shape;
  p->parts = parts;
  params_.push_back(std::move(p));
  return *params_.back();
}

tensor::Backend& ParameterSet::backend() const {
  if (!backend_) throw std::logic_error("ParameterSet: a ShapesOnly set holds no tensors");
  return *backend_;
}

int64_t ParameterSet::count() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->value.numel();
  return n;
}

void ParameterSet::zero_grads() {
  for (auto& p : params_) backend().fill(p->grad, 0.0);
}

void ParameterSet::initialise(uint64_t seed, double std, int64_t num_layers) {
  tensor::Backend& b = backend();
  for (auto& p : params_) {
    const int64_t layers = p->scaled_layers > 0 ? p->scaled_layers : num_layers;
    const double scaled = std / std::sqrt(2.0 * double(layers));
    switch (p->init) {
      case Init::Zeros: b.fill(p->value, 0.0); break;
      case Init::Ones: b.fill(p->value, 1.0); break;
      case Init::Normal:
      case Init::ScaledNormal: {
        // Drawn in f32 and rounded once, so every dtype starts from the same weights; a shard
        // draws its part of the whole weight's numbers, the same in every layout.
        tensor::Tensor f32 = b.empty(p->value.shape(), tensor::DType::F32);
        const float deviation = float(p->init == Init::Normal ? std : scaled);
        const tensor::RngKey key{.seed = seed, .stream = init_stream(p->name)};
        if (p->split != TpSplit::None && tp_.active()) {
          draw_shard(b, f32, *p, tp_, deviation, key);
        } else {
          b.normal(f32, 0.0f, deviation, key);
        }
        b.copy(f32, p->value);
        break;
      }
    }
  }
}

}  // namespace megatron::model
