// A linear layer y = x W^T + b with W [out, in] (Megatron's layout), and its backward.
#pragma once

#include <string>

#include "model/parameter.hpp"

namespace megatron::model {

class Linear {
 public:
  Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias,
         Init init, TpSplit split);
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  Parameter& weight() const { return *weight_; }

  // x [n, in] -> a new y [n, out] of x's dtype.
  tensor::Tensor forward(tensor::Backend& backend, const tensor::Tensor& x) const;
  // Accumulates dW and db from dy [n, out] and the forward input x; returns dx [n, in] when
  // want_dx (the first layer of a model has no use for it).
  tensor::Tensor backward(tensor::Backend& backend, const tensor::Tensor& dy,
                          const tensor::Tensor& x, bool want_dx = true) const;

 private:
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  int64_t in_, out_;
};

}  // namespace megatron::model
