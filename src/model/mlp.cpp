#include "model/mlp.hpp"

namespace megatron::model {

using tensor::Tensor;

namespace {

void activation_forward(tensor::Backend& b, Activation a, const Tensor& fc1, Tensor& act) {
  switch (a) {
    case Activation::Swiglu: b.swiglu_forward(fc1, act); return;
    case Activation::Geglu: b.geglu_forward(fc1, act); return;
    case Activation::Gelu:
    case Activation::GeluTanh: b.gelu_forward(fc1, act, a == Activation::GeluTanh); return;
  }
}

void activation_backward(tensor::Backend& b, Activation a, const Tensor& dact, const Tensor& fc1,
                         Tensor& dfc1) {
  switch (a) {
    case Activation::Swiglu: b.swiglu_backward(dact, fc1, dfc1); return;
    case Activation::Geglu: b.geglu_backward(dact, fc1, dfc1); return;
    case Activation::Gelu:
    case Activation::GeluTanh: b.gelu_backward(dact, fc1, dfc1, a == Activation::GeluTanh); return;
  }
}

}  // namespace

Mlp::Mlp(ParameterSet& params, const std::string& prefix, const ModelConfig& c,
         const MlpSpec& spec)
    : spec_(spec),
      ffn_(params.tp().shard(c.ffn)),
      fc1_(params, prefix + "mlp.linear_fc1", c.hidden, spec.gated() ? 2 * c.ffn : c.ffn,
           c.linear_bias, Init::Normal, TpSplit::Rows, spec.gated() ? 2 : 1),
      fc2_(params, prefix + "mlp.linear_fc2", c.ffn, c.hidden, c.linear_bias, Init::ScaledNormal,
           TpSplit::Columns) {}

bool Mlp::fuses_gelu() const {
  return spec_.activation == Activation::GeluTanh && fc1_.fuses_gelu();
}

Tensor Mlp::forward(tensor::Backend& b, const Tensor& x, MlpSaved& saved, bool keep) const {
  Tensor act;
  Tensor fc1;
  if (fuses_gelu()) {
    fc1 = fc1_.forward_gelu(b, x, act);
  } else {
    fc1 = fc1_.forward(b, x);
    act = b.empty({x.dim(0), ffn_}, x.dtype());
    activation_forward(b, spec_.activation, fc1, act);
  }
  Tensor y = fc2_.forward(b, act);
  if (keep) saved = {.fc1 = std::move(fc1), .act = std::move(act)};
  return y;
}

Tensor Mlp::backward(tensor::Backend& b, const Tensor& dy, const Tensor& x, MlpSaved& saved) const {
  if (fuses_gelu()) {
    // fc2's data gradient, the GeLU's and fc1's bias gradient in one GEMM (on CUDA).
    Tensor dfc1 = fc2_.backward_through_gelu(b, dy, saved.act, saved.fc1, fc1_);
    saved = {};
    return fc1_.backward_without_bias(b, dfc1, x);
  }
  Tensor dact = fc2_.backward(b, dy, saved.act);
  saved.act = {};
  Tensor dfc1 = b.empty(saved.fc1.shape(), dy.dtype());
  activation_backward(b, spec_.activation, dact, saved.fc1, dfc1);
  saved = {};
  return fc1_.backward(b, dfc1, x);
}

}  // namespace megatron::model
