// A block's MLP, built from its spec (model::MlpSpec): fc1 (column-parallel; a gated unit's gate
// and up projection side by side), the activation, fc2 (row-parallel). Dense today; a mixture of
// experts is another MLP behind the same calls.
#pragma once

#include <string>

#include "model/block_spec.hpp"
#include "model/linear.hpp"
#include "model/model_config.hpp"

namespace megatron::model {

// What backward needs; dropped by it.
struct MlpSaved {
  tensor::Tensor fc1;  // before the activation
  tensor::Tensor act;  // after it
};

class Mlp {
 public:
  // `prefix`: the block's parameter prefix ("decoder.layers.3."); the parameters are
  // mlp.linear_fc1 and mlp.linear_fc2 under it, made in that order.
  Mlp(ParameterSet& params, const std::string& prefix, const ModelConfig& config,
      const MlpSpec& spec);

  // x: every row of the normed hidden states. Returns fc2's output on this rank, a partial sum
  // over tensor-parallel ranks without fc2's bias (bias_dropout_add adds it once summed); keeps
  // what backward needs in `saved` when `keep`.
  tensor::Tensor forward(tensor::Backend& b, const tensor::Tensor& x, MlpSaved& saved,
                         bool keep) const;
  // out = residual + dropout(y + fc2's bias), y the summed output.
  void bias_dropout_add(tensor::Backend& b, tensor::Tensor& y, const tensor::Tensor& residual,
                        tensor::Tensor& out, float p, tensor::RngKey key) const {
    fc2_.bias_dropout_add(b, y, residual, out, p, key);
  }
  // fc2's bias gradient from this rank's rows of the output gradient.
  void bias_grad(tensor::Backend& b, const tensor::Tensor& dy) const { fc2_.bias_grad(b, dy); }
  // dy: every row's output gradient; x: forward's input. Consumes `saved`; returns dx on this
  // rank, a partial sum over tensor-parallel ranks.
  tensor::Tensor backward(tensor::Backend& b, const tensor::Tensor& dy, const tensor::Tensor& x,
                          MlpSaved& saved) const;

 private:
  // A tanh-GeLU with an fc1 bias runs fused (Backend::gemm_bias_gelu, gemm_dgelu_bgrad).
  bool fuses_gelu() const;

  MlpSpec spec_;
  int64_t ffn_;  // this rank's
  Linear fc1_;
  Linear fc2_;
};

}  // namespace megatron::model
