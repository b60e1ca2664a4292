// The optimizer across ranks: gradients reduced over the data-parallel group bucket by bucket
// while backward still runs (all-reduce, or reduce-scatter under the distributed optimizer,
// ZeRO-1), sequence-parallel and tied-embedding gradients summed across their groups, the global
// gradient norm, and the update.
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
  // `distributed`: each data-parallel rank keeps f32 masters and moments for 1/dp of every
  // bucket only, and the updated weights are all-gathered. `bucket_elements`: the smallest
  // bucket of gradients reduced in one collective.
  ParallelOptimizer(tensor::Backend& backend, model::ParameterSet& params,
                    const parallel::ProcessGroups& groups, const optim::OptimizerConfig& config,
                    bool distributed, int64_t bucket_elements, bool tied_embeddings);

  // Zeroes the gradients before an iteration's first backward.
  void begin_iteration();
  // During an iteration's last backward: every parameter of index >= first_param (creation
  // order) has its final gradient. Sums the newly complete ones across their model-parallel
  // groups and starts the data-parallel reduction of every bucket now complete.
  void grads_ready(size_t first_param);
  // After the last backward: everything grads_ready has not done yet, then waits for the
  // reductions. Every gradient this rank updates is then complete.
  void finish_gradients();
  // L2 norm of the whole model's gradient (every parameter counted once), times `unscale`.
  double grad_norm(double unscale);
  void step(double lr, double grad_scale);
  int64_t state_bytes() const { return optimizer_->state_bytes(); }

  // What this rank's optimizer holds for checkpoints: for each tensor it updates, the parameter,
  // which elements of the parameter's shard ([offset, offset + numel): all of it, or a
  // distributed optimizer's slice), and their state.
  struct Owned {
    const model::Parameter* param;
    int64_t offset, numel;
    optim::Optimizer::State state;
  };
  std::vector<Owned> owned();
  int64_t steps() const { return optimizer_->steps(); }
  void set_steps(int64_t steps) { optimizer_->set_steps(steps); }
  bool distributed() const { return distributed_; }
  size_t buckets() const { return buffers_.buckets().size(); }

 private:
  void complete_across_model_parallel(model::Parameter& p);
  void start_reduction(const FlatBuffers::Bucket& bucket);
  void gather_weights();

  tensor::Backend& backend_;
  model::ParameterSet& params_;
  const parallel::ProcessGroups& groups_;
  bool distributed_;
  // The word embedding when it is tied across the first and last stage (its gradient is summed
  // over the embedding group), else null.
  const model::Parameter* tied_embedding_ = nullptr;
  FlatBuffers buffers_;
  struct Piece {  // distributed: a parameter's part inside this rank's slices (views)
    tensor::Tensor value, grad;
  };
  std::deque<Piece> pieces_;  // stable addresses: the optimizer points into them
  struct Place {  // each optimizer tensor's parameter and offset in its shard
    const model::Parameter* param;
    int64_t offset, numel;
  };
  std::vector<Place> places_;
  // The gradients whose squares make this rank's part of the norm: whole parameters, or under
  // the distributed optimizer this rank's pieces; each counted once over the model.
  std::vector<const tensor::Tensor*> norm_terms_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  size_t complete_from_ = 0;  // parameters [complete_from_, n) are complete this iteration
  size_t next_bucket_ = 0;    // buckets [next_bucket_, end) have started reducing (counts down)
  std::vector<std::unique_ptr<dist::Request>> reductions_;
};

}  // namespace megatron::train
