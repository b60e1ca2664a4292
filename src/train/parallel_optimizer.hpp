// The optimizer across ranks: gradients reduced over the data-parallel group (all-reduce, or
// reduce-scatter under the distributed optimizer, ZeRO-1), sequence-parallel and tied-embedding
// gradients summed across their groups, the global gradient norm, and the update.
#pragma once

#include <deque>
#include <memory>

#include "model/parameter.hpp"
#include "optim/optimizer.hpp"
#include "parallel/process_groups.hpp"
#include "train/flat_buffers.hpp"

namespace megatron::train {

class ParallelOptimizer {
 public:
  // `distributed`: each data-parallel rank keeps f32 masters and moments for 1/dp of the
  // parameters only, and the updated weights are all-gathered.
  ParallelOptimizer(tensor::Backend& backend, model::ParameterSet& params,
                    const parallel::ProcessGroups& groups, const optim::OptimizerConfig& config,
                    bool distributed);

  void zero_grads();
  // After the last backward of an iteration: every gradient this rank updates is complete.
  void reduce_gradients();
  // L2 norm of the whole model's gradient (every parameter counted once), times `unscale`.
  double grad_norm(double unscale);
  void step(double lr, double grad_scale);
  int64_t state_bytes() const { return optimizer_->state_bytes(); }

 private:
  // Whether this rank's copy of p enters the norm: tensor-parallel replicas and the tied
  // embedding's second copy are counted once.
  bool counted(const model::Parameter& p) const;
  void gather_weights();
  // This data-parallel rank's slice of a flat buffer.
  tensor::Tensor own_shard(tensor::Tensor& flat) const;

  tensor::Backend& backend_;
  model::ParameterSet& params_;
  const parallel::ProcessGroups& groups_;
  bool distributed_;
  FlatBuffers buffers_;
  struct Piece {  // distributed: a parameter's part inside this rank's slice
    model::Parameter* param;
    tensor::Tensor value, grad;  // views
  };
  std::deque<Piece> pieces_;  // stable addresses: the optimizer points into them
  std::unique_ptr<optim::Optimizer> optimizer_;
};

}  // namespace megatron::train
