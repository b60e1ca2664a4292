#include "model/linear.hpp"

namespace megatron::model {

Linear::Linear(ParameterSet& params, const std::string& name, int64_t in, int64_t out, bool bias,
               Init init, TpSplit split, int64_t parts) {
  weight_ = &params.add(name + ".weight", {out, in}, init, split, true, parts);
  if (bias) {
    // A row-parallel layer's bias is added once after the reduction, so it is not split.
    const TpSplit bias_split = split == TpSplit::Rows ? TpSplit::Rows : TpSplit::None;
    bias_ = &params.add(name + ".bias", {out}, Init::Zeros, bias_split, false, parts);
  }
}

tensor::Tensor Linear::forward(tensor::Backend& backend, const tensor::Tensor& x) const {
  tensor::Tensor y = backend.empty({x.dim(0), weight_->value.dim(0)}, x.dtype());
  if (bias_ && !row_parallel()) {
    backend.gemm_bias(x, false, weight_->value, true, bias_->value, y);
  } else {
    backend.gemm(x, false, weight_->value, true, y);
  }
  return y;
}

void Linear::add_bias(tensor::Backend& backend, tensor::Tensor& y) const {
  if (bias_) backend.bias_add(y, bias_->value);
}

tensor::Tensor Linear::backward(tensor::Backend& backend, const tensor::Tensor& dy,
                                const tensor::Tensor& x, bool want_dx) const {
  backend.gemm(dy, true, x, false, weight_->grad, 1.0f, 1.0f);
  if (!row_parallel()) bias_grad(backend, dy);
  if (!want_dx) return {};
  tensor::Tensor dx = backend.empty({dy.dim(0), weight_->value.dim(1)}, dy.dtype());
  backend.gemm(dy, false, weight_->value, false, dx);
  return dx;
}

void Linear::bias_grad(tensor::Backend& backend, const tensor::Tensor& dy) const {
  if (bias_) backend.bias_grad(dy, bias_->grad);
}

}  // namespace megatron::model
