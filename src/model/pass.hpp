// What one forward or backward pass over a micro-batch knows besides its tensors: the backend,
// whether it trains (dropout on), and the coordinates that key its random numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "model/rng_streams.hpp"
#include "tensor/backend.hpp"

namespace megatron::model {

struct Pass {
  tensor::Backend& backend;
  bool training = true;
  uint64_t seed = 0;
  int64_t iteration = 0;
  int64_t microbatch = 0;
  // Set on an iteration's last backward through a chunk: called as gradients become final, with
  // the index (in creation order) from which every parameter's gradient is complete, so their
  // reduction can start while backward goes on.
  const std::function<void(size_t first_param)>* on_grads_ready = nullptr;
  // Set on a training forward through the chunk that ends the model: each token's loss gradient
  // is this over the micro-batch's loss-mask sum (at least 1), the LossGrads::token its backward
  // gets. Knowing it, a fused head computes its gradients during the forward.
  std::optional<double> loss_grad_numerator;

  void grads_ready(size_t first_param) const {
    if (on_grads_ready) (*on_grads_ready)(first_param);
  }

  tensor::RngKey dropout_key(int64_t layer, DropoutSite site) const {
    return {.seed = seed, .stream = dropout_stream(iteration, microbatch, layer, site)};
  }
  float dropout(double p) const { return training ? float(p) : 0.0f; }
};

}  // namespace megatron::model
