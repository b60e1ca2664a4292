#include "model/norm.hpp"

namespace megatron::model {

using tensor::DType;

Norm::Norm(ParameterSet& params, const std::string& name, int64_t hidden, NormKind kind,
           double eps)
    : kind_(kind), eps_(float(eps)) {
  weight_ = &params.add(name + ".weight", {hidden}, Init::Ones, TpSplit::None, false);
  if (kind == NormKind::LayerNorm) {
    bias_ = &params.add(name + ".bias", {hidden}, Init::Zeros, TpSplit::None, false);
  }
}

tensor::Tensor Norm::forward(tensor::Backend& backend, const tensor::Tensor& x,
                             Saved& saved) const {
  const int64_t rows = x.dim(0);
  tensor::Tensor y = backend.empty(x.shape(), x.dtype());
  saved.rstd = backend.empty({rows}, DType::F32);
  if (kind_ == NormKind::LayerNorm) {
    saved.mean = backend.empty({rows}, DType::F32);
    backend.layer_norm_forward(x, weight_->value, bias_->value, eps_, y, saved.mean, saved.rstd);
  } else {
    backend.rms_norm_forward(x, weight_->value, eps_, y, saved.rstd);
  }
  return y;
}

tensor::Tensor Norm::backward(tensor::Backend& backend, const tensor::Tensor& dy,
                              const tensor::Tensor& x, const Saved& saved) const {
  tensor::Tensor dx = backend.empty(x.shape(), dy.dtype());
  if (kind_ == NormKind::LayerNorm) {
    backend.layer_norm_backward(dy, x, weight_->value, saved.mean, saved.rstd, dx, weight_->grad,
                                bias_->grad);
  } else {
    backend.rms_norm_backward(dy, x, weight_->value, saved.rstd, dx, weight_->grad);
  }
  return dx;
}

}  // namespace megatron::model
