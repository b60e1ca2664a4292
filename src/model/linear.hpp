// A linear layer y = x W^T + b with W [out, in] (Megatron's layout), and its backward. Under
// tensor parallelism W is this rank's shard: rows for column-parallel, columns for row-parallel.
#pragma once

#include <string>

#include "model/parameter.hpp"

namespace megatron::model {

class Linear {
 public:
  // `in` and `out` are the whole layer's; `parts` as Parameter::parts.
  Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias,
         Init init, TpSplit split, int64_t parts = 1);
  Parameter& weight() const { return *weight_; }

  // x [n, in_local] -> a new y [n, out_local] of x's dtype. A row-parallel layer's output is a
  // partial sum: its bias is left to add_bias once the sum is complete.
  tensor::Tensor forward(tensor::Backend& backend, const tensor::Tensor& x) const;
  void add_bias(tensor::Backend& backend, tensor::Tensor& y) const;
  // out = residual + dropout(y + bias) once a row-parallel layer's sum y is complete (y is
  // scratch): one kernel on CUDA (Backend::bias_dropout_add).
  void bias_dropout_add(tensor::Backend& backend, tensor::Tensor& y,
                        const tensor::Tensor& residual, tensor::Tensor& out, float p,
                        tensor::RngKey key) const;
  // Accumulates dW (and db unless row-parallel: bias_grad) from dy and the forward input x;
  // returns dx [n, in_local] when want_dx (the first layer of a model has no use for it).
  tensor::Tensor backward(tensor::Backend& backend, const tensor::Tensor& dy,
                          const tensor::Tensor& x, bool want_dx = true) const;
  void bias_grad(tensor::Backend& backend, const tensor::Tensor& dy) const;

  // The MLP pair fused with a tanh-GeLU between them (Backend::gemm_bias_gelu and
  // gemm_dgelu_bgrad), for a column-parallel layer with a bias (fc1) and the layer after it:
  // act = gelu_tanh(pre = x W^T + b); returns pre, writes act.
  tensor::Tensor forward_gelu(tensor::Backend& backend, const tensor::Tensor& x,
                              tensor::Tensor& act) const;
  bool fuses_gelu() const { return bias_ != nullptr && !row_parallel(); }
  // On the layer after the GeLU (fc2): accumulates dW from dy and its input act, and returns
  // dpre, the gradient at `before`'s pre-activation, accumulating `before`'s bias gradient.
  tensor::Tensor backward_through_gelu(tensor::Backend& backend, const tensor::Tensor& dy,
                                       const tensor::Tensor& act, const tensor::Tensor& pre,
                                       const Linear& before) const;
  // Accumulates dW only (its bias gradient was taken by backward_through_gelu); returns dx.
  tensor::Tensor backward_without_bias(tensor::Backend& backend, const tensor::Tensor& dy,
                                       const tensor::Tensor& x) const;

 private:
  bool row_parallel() const { return weight_->split == TpSplit::Columns; }

  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace megatron::model
