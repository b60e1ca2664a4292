#include "model/parameter.hpp"

#include <cmath>

#include "model/rng_streams.hpp"

namespace megatron::model {

Parameter& ParameterSet::add(std::string name, const tensor::Shape& shape, Init init,
                             TpSplit split, bool weight_decay) {
  auto p = std::make_unique<Parameter>();
  p->name = std::move(name);
  p->value = backend_.empty(shape, dtype_);
  p->grad = backend_.zeros(shape, tensor::DType::F32);
  p->init = init;
  p->split = split;
  p->weight_decay = weight_decay;
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
        tensor::Tensor f32 = backend_.empty(p->value.shape(), tensor::DType::F32);
        backend_.normal(f32, 0.0f, float(p->init == Init::Normal ? std : scaled),
                        {.seed = seed, .stream = init_stream(p->name)});
        backend_.copy(f32, p->value);
        break;
      }
    }
  }
}

}  // namespace megatron::model
