#include "optim/optimizer.hpp"

#include <cmath>

namespace megatron::optim {

using tensor::DType;

Optimizer::Optimizer(tensor::Backend& backend, std::vector<OptimizedTensor> tensors,
                     const OptimizerConfig& config)
    : backend_(backend), config_(config) {
  slots_.reserve(tensors.size());
  for (OptimizedTensor& t : tensors) {
    Slot slot{.target = t};
    if (t.value->dtype() == DType::F32) {
      slot.master = *t.value;
    } else {
      slot.master = backend_.empty(t.value->shape(), DType::F32);
      backend_.copy(*t.value, slot.master);
    }
    slot.moment1 = backend_.zeros(t.value->shape(), DType::F32);
    if (config_.kind == OptimizerKind::AdamW) {
      slot.moment2 = backend_.zeros(t.value->shape(), DType::F32);
    }
    slots_.push_back(std::move(slot));
  }
}

double Optimizer::grad_norm(double unscale) {
  std::vector<tensor::Tensor> grads;
  grads.reserve(slots_.size());
  for (const Slot& slot : slots_) grads.push_back(*slot.target.grad);
  return std::sqrt(backend_.sum_squares_many(grads)) * unscale;
}

void Optimizer::step(double lr, double grad_scale) {
  ++steps_;
  if (config_.kind == OptimizerKind::AdamW) {
    // Every parameter in one call: the CUDA backend updates many tensors per launch.
    std::vector<tensor::AdamWParam> params;
    params.reserve(slots_.size());
    for (Slot& slot : slots_) {
      const bool copy_out = !slot.master.same_storage(*slot.target.value);
      params.push_back({.master = slot.master,
                        .grad = *slot.target.grad,
                        .m = slot.moment1,
                        .v = slot.moment2,
                        .value = copy_out ? *slot.target.value : tensor::Tensor(),
                        .weight_decay = slot.target.weight_decay ? float(config_.weight_decay)
                                                                 : 0.0f});
    }
    backend_.adamw_update_many(params, {.lr = float(lr),
                                        .beta1 = float(config_.beta1),
                                        .beta2 = float(config_.beta2),
                                        .eps = float(config_.eps),
                                        .step = steps_,
                                        .grad_scale = float(grad_scale)});
    return;
  }
  for (Slot& slot : slots_) {
    const float decay = slot.target.weight_decay ? float(config_.weight_decay) : 0.0f;
    backend_.sgd_update(slot.master, *slot.target.grad, slot.moment1,
                        {.lr = float(lr),
                         .momentum = float(config_.momentum),
                         .weight_decay = decay,
                         .grad_scale = float(grad_scale)});
    if (!slot.master.same_storage(*slot.target.value)) backend_.copy(slot.master, *slot.target.value);
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const Slot& slot : slots_) {
    if (!slot.master.same_storage(*slot.target.value)) bytes += int64_t(slot.master.bytes());
    bytes += int64_t(slot.moment1.bytes());
    if (slot.moment2.defined()) bytes += int64_t(slot.moment2.bytes());
  }
  return bytes;
}

}  // namespace megatron::optim
