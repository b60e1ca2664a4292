// A model parameter: its weight in the model's dtype, its f32 gradient, how it is initialised
// and which dimension tensor parallelism splits (the parallel layers only add communication).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/tensor_parallel.hpp"
#include "tensor/backend.hpp"

namespace megatron::model {

enum class Init { Normal, ScaledNormal, Zeros, Ones };

// Which dimension of the (global) weight is divided across tensor-parallel ranks.
enum class TpSplit { None, Rows, Columns };  // Rows: column-parallel linear, vocab embedding

struct Parameter {
  std::string name;      // e.g. "layers.3.mlp.fc1.weight"
  tensor::Tensor value;  // model dtype
  tensor::Tensor grad;   // f32, summed over micro-batches until the optimizer step
  Init init = Init::Normal;
  TpSplit split = TpSplit::None;
  bool weight_decay = true;  // biases and norm weights are not decayed
  tensor::Shape global_shape;  // the whole weight; value holds this rank's shard of it
  // A fused weight of `parts` stacked matrices (SwiGLU's gate and up) is split part by part, so
  // each rank holds matching slices of every part.
  int64_t parts = 1;
  // The last pipeline stage's copy of a tied word embedding: its gradient is summed with the
  // first stage's, and it is left out of the gradient norm (the first stage counts it).
  bool shared_copy = false;
  // ScaledNormal: the layer count its deviation is scaled by (std / sqrt(2 * layers)); 0: the
  // model's. T5's decoder blocks scale by the decoder's layers, as Megatron's decoder config.
  int64_t scaled_layers = 0;
  // Rows are the padded vocabulary (word embedding, output layer and its bias): another
  // tensor-parallel size pads it to another length, so a checkpoint may hold more or fewer rows.
  bool padded_vocab = false;
  // Replicated across tensor-parallel ranks while each rank's gradient covers only its own heads
  // (the q/k norm weights): the gradient is summed over the group, sequence parallel or not.
  bool tp_partial_grad = false;
};

// Whether tensor-parallel rank `tp_rank`'s copy of p is the one that counts for the whole model
// (gradient norm, parameter totals): shards always, replicated parameters on tp rank 0 only, a
// tied embedding's second copy never.
inline bool counts_once(const Parameter& p, int64_t tp_rank) {
  if (p.shared_copy) return false;
  return p.split != TpSplit::None || tp_rank == 0;
}

// Owns every parameter of a model in creation order (the order checkpoints and optimizers see).
class ParameterSet {
 public:
  ParameterSet(tensor::Backend& backend, tensor::DType dtype, parallel::TensorParallel tp = {})
      : backend_(&backend), dtype_(dtype), tp_(tp) {}
  // A set that records each parameter's name, whole shape and split but allocates no tensor
  // (value and grad stay empty): a model described before it is built, so that its shapes can
  // be checked against a checkpoint's without allocating a model of any size. Only add() and
  // all() may be used.
  struct ShapesOnly {};
  ParameterSet(ShapesOnly, tensor::DType dtype, parallel::TensorParallel tp = {})
      : dtype_(dtype), tp_(tp) {}
  // `shape` is the whole weight's; this rank allocates its tensor-parallel shard of it.
  Parameter& add(std::string name, const tensor::Shape& shape, Init init, TpSplit split,
                 bool weight_decay, int64_t parts = 1);
  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  int64_t count() const;  // scalar parameters
  void zero_grads();
  // Weights from N(0, std) (std / sqrt(2 * layers) for ScaledNormal), each from its own Philox
  // stream named by its name, so a weight does not depend on what else the model holds, nor
  // on the layout: a shard holds exactly its part of the whole weight.
  void initialise(uint64_t seed, double std, int64_t num_layers);
  const parallel::TensorParallel& tp() const { return tp_; }

 private:
  tensor::Backend& backend() const;  // std::logic_error for a ShapesOnly set
  tensor::Backend* backend_ = nullptr;  // null: ShapesOnly
  tensor::DType dtype_;
  parallel::TensorParallel tp_;
  std::vector<std::unique_ptr<Parameter>> params_;
};

}  // namespace megatron::model
