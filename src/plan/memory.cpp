#include "plan/memory.hpp"

#include "plan/activations.hpp"

namespace megatron::plan {

BytesPerParameter bytes_per_parameter(const ModelShape& x) {
  const bool mixed = x.dtype != recipe::DType::F32;
  double moments = 8;  // Adam: first and second moment in f32
  if (x.optimizer == recipe::Optimizer::Sgd) moments = x.sgd_momentum > 0 ? 4 : 0;
  BytesPerParameter out;
  out.weights = mixed ? 2 : 4;
  out.gradients = 4;
  out.optimizer = (mixed ? 4 : 0) + moments;  // mixed precision keeps an f32 master copy
  // The distributed optimizer shards its state over every rank that holds the same weights.
  if (x.distributed_optimizer) out.optimizer /= static_cast<double>(x.gradient_group());
  return out;
}

void fill_memory(const ModelShape& x, std::vector<Stage>& stages) {
  const BytesPerParameter per = bytes_per_parameter(x);
  for (Stage& stage : stages) {
    const double n = static_cast<double>(stage.parameters_per_rank);
    stage.activation_bytes_per_microbatch = stage_activation_bytes(x, stage);
    stage.microbatches_in_flight = microbatches_in_flight(x, stage.index);
    stage.memory.weights = n * per.weights;
    stage.memory.gradients = n * per.gradients;
    stage.memory.optimizer = n * per.optimizer;
    stage.activation_bytes_transient = stage_transient_activation_bytes(x, stage);
    stage.memory.activations = stage.activation_bytes_per_microbatch * stage.microbatches_in_flight +
                               stage.activation_bytes_transient;
  }
}

int64_t peak_stage(const std::vector<Stage>& stages) {
  int64_t best = 0;
  for (const Stage& stage : stages)
    if (stage.memory.total() > stages[best].memory.total()) best = stage.index;
  return best;
}

}  // namespace megatron::plan
