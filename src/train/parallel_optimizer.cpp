#include "train/parallel_optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/scalar_reduce.hpp"

namespace megatron::train {

using tensor::Tensor;

ParallelOptimizer::ParallelOptimizer(tensor::Backend& backend, model::ParameterSet& params,
                                     const parallel::ProcessGroups& groups,
                                     const optim::OptimizerConfig& config, bool distributed,
                                     int64_t bucket_elements, bool tied_embeddings)
    : backend_(backend),
      params_(params),
      groups_(groups),
      distributed_(distributed && groups.dp_size > 1),
      buffers_(backend, params, groups.dp_size, bucket_elements) {
  if (tied_embeddings && groups.embedding) {
    for (const auto& p : params.all()) {
      if (p->name == "embedding.word_embeddings.weight") tied_embedding_ = p.get();
    }
  }
  const auto counted = [&](const model::Parameter& p) {
    return model::counts_once(p, groups.coord.tp);
  };
  std::vector<optim::OptimizedTensor> targets;
  if (!distributed_) {
    for (const auto& p : params.all()) {
      targets.push_back({.name = p->name, .value = &p->value, .grad = &p->grad,
                         .weight_decay = p->weight_decay});
      places_.push_back({p.get(), 0, p->value.numel()});
      if (counted(*p)) norm_terms_.push_back(&p->grad);
    }
  } else {
    for (const FlatBuffers::Bucket& bucket : buffers_.buckets()) {
      const auto [first, last] = buffers_.slice(bucket, groups.dp->rank());
      for (const FlatBuffers::Range& r : buffers_.ranges()) {
        const int64_t begin = std::max(first, r.begin), end = std::min(last, r.end);
        if (begin >= end) continue;
        Piece& piece = pieces_.emplace_back(Piece{.value = buffers_.weights().slice(begin, end),
                                                  .grad = buffers_.grads().slice(begin, end)});
        targets.push_back({.name = r.param->name, .value = &piece.value, .grad = &piece.grad,
                           .weight_decay = r.param->weight_decay});
        places_.push_back({r.param, begin - r.begin, end - begin});
        if (counted(*r.param)) norm_terms_.push_back(&piece.grad);
      }
    }
  }
  optimizer_ = std::make_unique<optim::Optimizer>(backend, std::move(targets), config);
}

std::vector<ParallelOptimizer::Owned> ParallelOptimizer::owned() {
  std::vector<Owned> out;
  for (size_t i = 0; i < places_.size(); ++i) {
    out.push_back({places_[i].param, places_[i].offset, places_[i].numel, optimizer_->state(i)});
  }
  return out;
}

void ParallelOptimizer::begin_iteration() {
  backend_.fill(buffers_.grads(), 0.0);
  complete_from_ = params_.all().size();
  next_bucket_ = buffers_.buckets().size();
  reductions_.clear();
}

void ParallelOptimizer::complete_across_model_parallel(model::Parameter& p) {
  // Under sequence parallelism the replicated parameters (norms, row-parallel biases, position
  // embeddings) saw only this rank's rows, and the q/k norms only this rank's heads on any
  // layout: their gradients are partial sums over the TP group.
  if (groups_.tp_size > 1 && p.split == model::TpSplit::None &&
      (params_.tp().sequence_parallel || p.tp_partial_grad)) {
    groups_.tp->all_reduce(p.grad);
  }
  // A tied embedding lives on the first and the last stage; each holds part of its gradient.
  if (&p == tied_embedding_) {
    groups_.embedding->all_reduce(p.grad);
  }
}

void ParallelOptimizer::grads_ready(size_t first_param) {
  // Newest first: every rank of a group completes its parameters in the same order, so their
  // collectives pair up.
  const auto& all = params_.all();
  while (complete_from_ > first_param) complete_across_model_parallel(*all[--complete_from_]);
  while (next_bucket_ > 0 && buffers_.buckets()[next_bucket_ - 1].first_param >= complete_from_) {
    start_reduction(buffers_.buckets()[--next_bucket_]);
  }
}

void ParallelOptimizer::start_reduction(const FlatBuffers::Bucket& bucket) {
  if (groups_.dp_size == 1) return;
  // Every rank scaled its loss by the global micro-batch count, so the sum over data-parallel
  // ranks is the mean over the global batch, as one process computes it.
  Tensor whole = buffers_.grads().slice(bucket.begin, bucket.end);
  if (distributed_) {
    const auto [first, last] = buffers_.slice(bucket, groups_.dp->rank());
    Tensor mine = buffers_.grads().slice(first, last);
    reductions_.push_back(groups_.dp->reduce_scatter_async(whole, mine));  // in place
  } else {
    reductions_.push_back(groups_.dp->all_reduce_async(whole));
  }
}

void ParallelOptimizer::finish_gradients() {
  grads_ready(0);
  for (auto& request : reductions_) request->wait();
  reductions_.clear();
}

double ParallelOptimizer::grad_norm(double unscale) {
  std::vector<tensor::Tensor> terms;
  terms.reserve(norm_terms_.size());
  for (const tensor::Tensor* grad : norm_terms_) terms.push_back(*grad);
  double sum = backend_.sum_squares_many(terms);
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
  // Each rank updated its slice of every bucket; the slices are all-gathered in place in the
  // weights' dtype, as Megatron's distributed optimizer gathers them.
  for (const FlatBuffers::Bucket& bucket : buffers_.buckets()) {
    const auto [first, last] = buffers_.slice(bucket, groups_.dp->rank());
    Tensor mine = buffers_.weights().slice(first, last);
    Tensor whole = buffers_.weights().slice(bucket.begin, bucket.end);
    groups_.dp->all_gather(mine, whole);
  }
}

}  // namespace megatron::train
