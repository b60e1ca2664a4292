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
      grads_(backend, params, groups.dp_size) {
  std::vector<optim::OptimizedTensor> targets;
  if (!distributed_) {
    for (const auto& p : params.all()) {
      targets.push_back({.name = p->name, .value = &p->value, .grad = &p->grad,
                         .weight_decay = p->weight_decay});
    }
  } else {
    const int64_t size = grads_.shard_size();
    const int64_t first = size * groups.dp->rank(), last = first + size;
    shard_grad_ = backend.zeros({size}, tensor::DType::F32);
    for (const GradBuffer::Range& r : grads_.ranges()) {
      const int64_t begin = std::max(first, r.begin), end = std::min(last, r.end);
      if (begin >= end) continue;
      Piece& piece = pieces_.emplace_back(Piece{
          .param = r.param,
          .value = r.param->value.flat().slice(begin - r.begin, end - r.begin),
          .grad = shard_grad_.slice(begin - first, end - first),
          .begin = begin,
          .end = end});
      targets.push_back({.name = r.param->name, .value = &piece.value, .grad = &piece.grad,
                         .weight_decay = r.param->weight_decay});
    }
  }
  optimizer_ = std::make_unique<optim::Optimizer>(backend, std::move(targets), config);
}

void ParallelOptimizer::zero_grads() { backend_.fill(grads_.flat(), 0.0); }

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
    groups_.dp->reduce_scatter(grads_.flat(), shard_grad_);
  } else {
    groups_.dp->all_reduce(grads_.flat());
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
  // Each rank updated its slice of the weights; all-gather the slices in the weights' dtype
  // (what Megatron's distributed optimizer gathers), then scatter them back into the tensors.
  const int64_t size = grads_.shard_size();
  const int64_t first = size * groups_.dp->rank();
  const tensor::DType dtype = params_.all().front()->value.dtype();
  Tensor mine = backend_.zeros({size}, dtype);
  for (Piece& piece : pieces_) {
    Tensor dst = mine.slice(piece.begin - first, piece.end - first);
    backend_.copy(piece.value, dst);
  }
  Tensor all = backend_.empty({size * groups_.dp_size}, dtype);
  groups_.dp->all_gather(mine, all);
  for (const GradBuffer::Range& r : grads_.ranges()) {
    Tensor dst = r.param->value.flat();
    backend_.copy(all.slice(r.begin, r.end), dst);
  }
}

}  // namespace megatron::train
