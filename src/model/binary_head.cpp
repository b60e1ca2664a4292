#include "model/binary_head.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/host_io.hpp"

namespace megatron::model {

using tensor::DType;
using tensor::Tensor;

BinaryHead::BinaryHead(ParameterSet& params, const ModelConfig& c)
    : tp_(params.tp()),
      pooler_(params, "pooler.dense", c.hidden, c.hidden, true, Init::Normal, TpSplit::None),
      classifier_(params, "binary_head", c.hidden, 2, true, Init::Normal, TpSplit::None) {}

void BinaryHead::forward(const Pass& pass, const Batch& batch, const Tensor& x,
                         BinaryHeadSaved* saved, Losses& losses, HeadOutputs* outputs) const {
  tensor::Backend& b = pass.backend;
  if (batch.sentence_order.size() != size_t(batch.batch)) {
    throw std::logic_error("a model with a binary head got a batch without sentence targets");
  }
  BinaryHeadSaved mine;
  BinaryHeadSaved& s = saved ? *saved : mine;
  s = {};
  // Under sequence parallelism each rank pools the sequences that start in its rows; the
  // replicated pooler's gradients are then summed over the tensor-parallel group as for every
  // replicated parameter, and the logits are summed here.
  const int64_t first_row = tp_.first_row(batch.rows());
  for (int64_t seq = 0; seq < batch.batch; ++seq) {
    const int64_t row = seq * batch.seq - first_row;
    if (row >= 0 && row < x.dim(0)) {
      s.sequences.push_back(seq);
      s.rows.push_back(row);
    }
  }
  const int64_t n = int64_t(s.sequences.size());
  s.logits.assign(size_t(batch.batch) * 2, 0.0f);
  if (n > 0) {
    s.first = b.empty({n, x.dim(1)}, x.dtype());
    for (int64_t i = 0; i < n; ++i) {
      Tensor to = s.first.slice(i, i + 1);
      b.copy(x.slice(s.rows[size_t(i)], s.rows[size_t(i)] + 1), to);
    }
    s.pooled = pooler_.forward(b, s.first);
    std::vector<float> pooled = tensor::to_floats(b, s.pooled);
    for (float& v : pooled) v = std::tanh(v);
    tensor::write_floats(b, s.pooled, pooled);
    const std::vector<float> logits = tensor::to_floats(b, classifier_.forward(b, s.pooled));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < 2; ++k) {
        s.logits[size_t(s.sequences[size_t(i)] * 2 + k)] = logits[size_t(i * 2 + k)];
      }
    }
  }
  if (tp_.active() && tp_.sequence_parallel) {
    Tensor all = tensor::from_floats(b, s.logits, {batch.batch * 2});
    tp_.group->all_reduce(all);
    s.logits = tensor::to_floats(b, all);
  }
  for (int64_t seq = 0; seq < batch.batch; ++seq) {
    const int32_t target = batch.sentence_order[size_t(seq)];
    if (target < 0) continue;
    const double l0 = s.logits[size_t(seq * 2)], l1 = s.logits[size_t(seq * 2 + 1)];
    const double max = std::max(l0, l1);
    const double lse = max + std::log(std::exp(l0 - max) + std::exp(l1 - max));
    losses.sop += lse - (target == 1 ? l1 : l0);
    losses.sentences += 1.0;
  }
  if (outputs) outputs->sentence_logits = s.logits;
}

void BinaryHead::backward(const Pass& pass, const Batch& batch, BinaryHeadSaved& s,
                          float sentence_grad, Tensor& dx) const {
  tensor::Backend& b = pass.backend;
  const int64_t n = int64_t(s.sequences.size());
  if (n > 0) {
    std::vector<float> dlogits(size_t(n) * 2, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t seq = s.sequences[size_t(i)];
      const int32_t target = batch.sentence_order[size_t(seq)];
      if (target < 0) continue;
      const double l0 = s.logits[size_t(seq * 2)], l1 = s.logits[size_t(seq * 2 + 1)];
      const double p1 = 1.0 / (1.0 + std::exp(l0 - l1));
      dlogits[size_t(i * 2)] = float(sentence_grad * ((1.0 - p1) - (target == 0 ? 1.0 : 0.0)));
      dlogits[size_t(i * 2 + 1)] = float(sentence_grad * (p1 - (target == 1 ? 1.0 : 0.0)));
    }
    Tensor dlogits_t = b.empty({n, 2}, s.pooled.dtype());
    tensor::write_floats(b, dlogits_t, dlogits);
    Tensor dpooled = classifier_.backward(b, dlogits_t, s.pooled);
    std::vector<float> grad = tensor::to_floats(b, dpooled);
    const std::vector<float> pooled = tensor::to_floats(b, s.pooled);
    for (size_t i = 0; i < grad.size(); ++i) grad[i] *= 1.0f - pooled[i] * pooled[i];
    tensor::write_floats(b, dpooled, grad);
    Tensor dfirst = pooler_.backward(b, dpooled, s.first);
    for (int64_t i = 0; i < n; ++i) {
      Tensor row = dx.slice(s.rows[size_t(i)], s.rows[size_t(i)] + 1);
      b.add(row, dfirst.slice(i, i + 1), row);
    }
  }
  s = {};
}

}  // namespace megatron::model
