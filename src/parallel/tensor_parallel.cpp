#include "parallel/tensor_parallel.hpp"

namespace megatron::parallel {

using tensor::Tensor;

Tensor gather_sequence(tensor::Backend& backend, const TensorParallel& tp, const Tensor& x) {
  if (!tp.active() || !tp.sequence_parallel) return x;
  tensor::Shape shape = x.shape();
  shape[0] *= tp.size;
  Tensor whole = backend.empty(shape, x.dtype());
  tp.group->all_gather(x, whole);
  return whole;
}

Tensor reduce_partial(tensor::Backend& backend, const TensorParallel& tp, Tensor partial) {
  if (!tp.active()) return partial;
  if (!tp.sequence_parallel) {
    tp.group->all_reduce(partial);
    return partial;
  }
  tensor::Shape shape = partial.shape();
  shape[0] /= tp.size;
  Tensor mine = backend.empty(shape, partial.dtype());
  tp.group->reduce_scatter(partial, mine);
  return mine;
}

}  // namespace megatron::parallel
