// AdamW and SGD over a model's parameters, with f32 master weights when the model keeps its
// weights in 16 bits, and the global gradient norm that clipping and overflow checks use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/kinds.hpp"
#include "tensor/backend.hpp"

namespace megatron::optim {

// One tensor the optimizer updates: the model's weight (any float dtype) and its f32 gradient,
// summed over the iteration's micro-batches.
struct OptimizedTensor {
  std::string name;
  tensor::Tensor* value = nullptr;
  tensor::Tensor* grad = nullptr;
  bool weight_decay = true;  // false for biases and norm weights, as Megatron
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double momentum = 0.9;  // SGD
};

class Optimizer {
 public:
  Optimizer(tensor::Backend& backend, std::vector<OptimizedTensor> tensors,
            const OptimizerConfig& config);

  // L2 norm over every gradient, times `unscale` (1 / loss scale). NaN or Inf when any
  // gradient is not finite.
  double grad_norm(double unscale);
  // One update with gradients multiplied by grad_scale (unscaling and clipping together);
  // then the 16-bit weights are refreshed from the f32 masters.
  void step(double lr, double grad_scale);
  int64_t steps() const { return steps_; }

  // The state a checkpoint saves and restores, for the i-th tensor (constructor order): the f32
  // master (the weight itself when f32), Adam's m and v or SGD's momentum (moment2 undefined).
  struct State {
    tensor::Tensor* master;
    tensor::Tensor* moment1;
    tensor::Tensor* moment2;
  };
  size_t size() const { return slots_.size(); }
  State state(size_t i) { return {&slots_[i].master, &slots_[i].moment1, &slots_[i].moment2}; }
  void set_steps(int64_t steps) { steps_ = steps; }

  // Bytes of optimizer state (masters that are not the weights themselves, and moments).
  int64_t state_bytes() const;

 private:
  struct Slot {
    OptimizedTensor target;
    tensor::Tensor master;  // the weight itself when it is f32
    tensor::Tensor moment1;  // Adam m, or SGD momentum
    tensor::Tensor moment2;  // Adam v
  };
  tensor::Backend& backend_;
  OptimizerConfig config_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
};

}  // namespace megatron::optim
