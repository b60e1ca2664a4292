#include "train/parallel_optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/scalar_reduce.hpp"

namespace megatron::train {

using tensor::Tensor;

ParallelOptimizer::ParallelOptimizer(tensor::Backend& backend, model::ParameterSet& params,
                                     const parallel::ProcessGroups& groups,
                                     const optim::OptimizerConfig& config, bool distributed)
    : backend_(backend),
      params_(params),
      groups_(groups),
      distributed_(distributed && groups.dp_size > 1),
      buffers_(backend, params, groups.dp_size) {
  std::vector<optim::OptimizedTensor> targets;
  if (!distributed_) {
    for (const auto& p : params.all()) {
      targets.push_back({.name = p->name, .value = &p->value, .grad = &p->grad,
                         .weight_decay = p->weight_decay});
    }
  } else {
    const int64_t size = buffers_.shard_size();
    const int64_t first = size * groups.dp->rank(), last = first + size;
    for (const FlatBuffers::Range& r : buffers_.ranges()) {
      const int64_t begin = std::max(first, r.begin), end = std::min(last, r.end);
      if (begin >= end) continue;
      Piece& piece = pieces_.emplace_back(Piece{.param = r.param,
                                                .value = buffers_.weights().slice(begin, end),
                                                .grad = buffers_.grads().slice(begin, end)});
      targets.push_back({.name = r.param->name, .value = &piece.value, .grad = &piece.grad,
                         .weight_decay = r.param->weight_decay});
    }
  }
  optimizer_ = std::make_unique<optim::Optimizer>(backend, std::move(targets), config);
}

void ParallelOptimizer::zero_grads() { backend_.fill(buffers_.grads(), 0.0); }

tensor::Tensor ParallelOptimizer::own_shard(tensor::Tensor& flat) const {
  const int64_t size = buffers_.shard_size(), first = size * groups_.dp->rank();
  return flat.slice(first, first + size);
}

void ParallelOptimizer::reduce_gradients() {
  // Under sequence parallelism the replicated parameters (norms, row-parallel biases, position
  // embeddings) saw only this rank's rows: their gradients are partial sums over the TP group.
  if (groups_.tp_size > 1 && params_.tp().sequence_parallel) {
    for (const auto& p : params_.all()) {
      if (p->split == model::TpSplit::None) groups_.tp->all_reduce(p->grad);
    }
  }
  // A tied embedding lives on the first and the last stage; each holds half of its gradient.
  if (groups_.embedding) {
    for (const auto& p : params_.all()) {
      if (p->name == "embedding.word_embeddings.weight") groups_.embedding->all_reduce(p->grad);
    }
  }
  if (groups_.dp_size == 1) return;
  // Every rank scaled its loss by the global micro-batch count, so the sum over data-parallel
  // ranks is the mean over the global batch, as one process computes it.
  if (distributed_) {
    Tensor mine = own_shard(buffers_.grads());
    groups_.dp->reduce_scatter(buffers_.grads(), mine);  // in place
  } else {
    groups_.dp->all_reduce(buffers_.grads());
  }
}

bool ParallelOptimizer::counted(const model::Parameter& p) const {
  if (p.shared_copy) return false;
  return p.split != model::TpSplit::None || groups_.coord.tp == 0;
}

double ParallelOptimizer::grad_norm(double unscale) {
  double sum = 0.0;
  if (!distributed_) {
    for (const auto& p : params_.all()) {
      if (counted(*p)) sum += backend_.sum_squares(p->grad);
    }
  } else {
    for (const Piece& piece : pieces_) {
      if (counted(*piece.param)) sum += backend_.sum_squares(piece.grad);
    }
  }
  // Whole gradients are summed over the model-parallel ranks; slices over every rank.
  dist::Communicator* group = distributed_ ? groups_.world.get() : groups_.model_parallel.get();
  sum = parallel::sum_across(backend_, *group, sum);
  return std::sqrt(sum) * unscale;
}

void ParallelOptimizer::step(double lr, double grad_scale) {
  optimizer_->step(lr, grad_scale);
  if (distributed_) gather_weights();
}

void ParallelOptimizer::gather_weights() {
  // Each rank updated its slice of the weights; the slices are all-gathered in place in the
  // weights' dtype, as Megatron's distributed optimizer gathers them.
  Tensor mine = own_shard(buffers_.weights());
  groups_.dp->all_gather(mine, buffers_.weights());
}

}  // namespace megatron::train
