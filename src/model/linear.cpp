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

void Linear::bias_dropout_add(tensor::Backend& backend, tensor::Tensor& y,
                              const tensor::Tensor& residual, tensor::Tensor& out, float p,
                              tensor::RngKey key) const {
  if (bias_) {
    backend.bias_dropout_add(y, bias_->value, residual, out, p, key);
  } else {
    backend.dropout_add(y, residual, out, p, key);
  }
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

tensor::Tensor Linear::forward_gelu(tensor::Backend& backend, const tensor::Tensor& x,
                                    tensor::Tensor& act) const {
  tensor::Tensor pre = backend.empty({x.dim(0), weight_->value.dim(0)}, x.dtype());
  act = backend.empty(pre.shape(), x.dtype());
  backend.gemm_bias_gelu(x, false, weight_->value, true, bias_->value, pre, act);
  return pre;
}

tensor::Tensor Linear::backward_through_gelu(tensor::Backend& backend, const tensor::Tensor& dy,
                                             const tensor::Tensor& act, const tensor::Tensor& pre,
                                             const Linear& before) const {
  backend.gemm(dy, true, act, false, weight_->grad, 1.0f, 1.0f);
  if (!row_parallel()) bias_grad(backend, dy);
  tensor::Tensor dpre = backend.empty(pre.shape(), dy.dtype());
  backend.gemm_dgelu_bgrad(dy, false, weight_->value, false, pre, dpre,
                           before.bias_ ? &before.bias_->grad : nullptr);
  return dpre;
}

tensor::Tensor Linear::backward_without_bias(tensor::Backend& backend, const tensor::Tensor& dy,
                                             const tensor::Tensor& x) const {
  backend.gemm(dy, true, x, false, weight_->grad, 1.0f, 1.0f);
  tensor::Tensor dx = backend.empty({dy.dim(0), weight_->value.dim(1)}, dy.dtype());
  backend.gemm(dy, false, weight_->value, false, dx);
  return dx;
}

}  // namespace megatron::model
