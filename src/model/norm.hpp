// LayerNorm or RMSNorm over the hidden dimension, as the recipe's `model.normalization` says.
#pragma once

#include <string>

#include "model/parameter.hpp"
#include "model/kinds.hpp"

namespace megatron::model {

class Norm {
 public:
  struct Saved {
    tensor::Tensor mean;  // LayerNorm only
    tensor::Tensor rstd;
  };

  Norm(ParameterSet& params, const std::string& name, int64_t hidden, NormKind kind,
       double eps);
  tensor::Tensor forward(tensor::Backend& backend, const tensor::Tensor& x, Saved& saved) const;
  // Accumulates the weight (and bias) gradients; returns dx.
  tensor::Tensor backward(tensor::Backend& backend, const tensor::Tensor& dy,
                          const tensor::Tensor& x, const Saved& saved) const;

 private:
  NormKind kind_;
  float eps_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace megatron::model
