#include "model/binary_head.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/host_io.hpp"

namespace megatron::model {

using tensor::DType;
using tensor::Tensor;

namespace {

std::unique_ptr<Linear> make_pooler(ParameterSet& params, const ModelConfig& c) {
  if (c.classes > 0 && !c.pooler) return nullptr;
  return std::make_unique<Linear>(params, "pooler.dense", c.hidden, c.hidden, true, Init::Normal,
                                  TpSplit::None);
}

}  // namespace

BinaryHead::BinaryHead(ParameterSet& params, const ModelConfig& c)
    : tp_(params.tp()),
      classes_(c.classes > 0 ? c.classes : 2),
      last_token_(c.classes > 0 && !c.pooler),
      pooler_(make_pooler(params, c)),
      classifier_(params, c.classes > 0 ? "classification_head" : "binary_head", c.hidden, classes_,
                  true, Init::Normal, TpSplit::None) {}

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
    int64_t token = 0;
    if (last_token_) {
      token = batch.valid_lengths.empty() ? batch.seq - 1 : batch.valid_lengths[size_t(seq)] - 1;
      if (token < 0 || token >= batch.seq) throw std::logic_error("a sequence's last token is outside it");
    }
    const int64_t row = seq * batch.seq + token - first_row;
    if (row >= 0 && row < x.dim(0)) {
      s.sequences.push_back(seq);
      s.rows.push_back(row);
    }
  }
  const int64_t n = int64_t(s.sequences.size()), C = classes_;
  s.logits.assign(size_t(batch.batch * C), 0.0f);
  if (n > 0) {
    s.first = b.empty({n, x.dim(1)}, x.dtype());
    for (int64_t i = 0; i < n; ++i) {
      Tensor to = s.first.slice(i, i + 1);
      b.copy(x.slice(s.rows[size_t(i)], s.rows[size_t(i)] + 1), to);
    }
    if (pooler_) {
      s.pooled = pooler_->forward(b, s.first);
      std::vector<float> pooled = tensor::to_floats(b, s.pooled);
      for (float& v : pooled) v = std::tanh(v);
      tensor::write_floats(b, s.pooled, pooled);
    } else {
      s.pooled = s.first;
    }
    const std::vector<float> logits = tensor::to_floats(b, classifier_.forward(b, s.pooled));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < C; ++k) {
        s.logits[size_t(s.sequences[size_t(i)] * C + k)] = logits[size_t(i * C + k)];
      }
    }
  }
  if (tp_.active() && tp_.sequence_parallel) {
    Tensor all = tensor::from_floats(b, s.logits, {batch.batch * C});
    tp_.group->all_reduce(all);
    s.logits = tensor::to_floats(b, all);
  }
  for (int64_t seq = 0; seq < batch.batch; ++seq) {
    const int32_t target = batch.sentence_order[size_t(seq)];
    if (target < 0) continue;
    if (target >= C) throw std::logic_error("a sequence's class is outside the classifier");
    const float* l = s.logits.data() + seq * C;
    const int64_t argmax = std::max_element(l, l + C) - l;
    double lse = 0.0;
    for (int64_t k = 0; k < C; ++k) lse += std::exp(double(l[k]) - double(l[argmax]));
    lse = double(l[argmax]) + std::log(lse);
    losses.sop += lse - double(l[target]);
    losses.sentences += 1.0;
    losses.correct += argmax == target ? 1.0 : 0.0;
  }
  if (outputs) outputs->sentence_logits = s.logits;
}

void BinaryHead::backward(const Pass& pass, const Batch& batch, BinaryHeadSaved& s,
                          float sentence_grad, Tensor& dx) const {
  tensor::Backend& b = pass.backend;
  const int64_t n = int64_t(s.sequences.size()), C = classes_;
  if (n > 0) {
    // d(lse - l_target)/dl_k = softmax_k - [k == target].
    std::vector<float> dlogits(size_t(n * C), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t seq = s.sequences[size_t(i)];
      const int32_t target = batch.sentence_order[size_t(seq)];
      if (target < 0) continue;
      const float* l = s.logits.data() + seq * C;
      const double max = *std::max_element(l, l + C);
      double sum = 0.0;
      for (int64_t k = 0; k < C; ++k) sum += std::exp(double(l[k]) - max);
      for (int64_t k = 0; k < C; ++k) {
        const double p = std::exp(double(l[k]) - max) / sum;
        dlogits[size_t(i * C + k)] = float(sentence_grad * (p - (k == target ? 1.0 : 0.0)));
      }
    }
    Tensor dlogits_t = b.empty({n, C}, s.pooled.dtype());
    tensor::write_floats(b, dlogits_t, dlogits);
    Tensor dpooled = classifier_.backward(b, dlogits_t, s.pooled);
    Tensor dfirst = dpooled;
    if (pooler_) {
      std::vector<float> grad = tensor::to_floats(b, dpooled);
      const std::vector<float> pooled = tensor::to_floats(b, s.pooled);
      for (size_t i = 0; i < grad.size(); ++i) grad[i] *= 1.0f - pooled[i] * pooled[i];
      tensor::write_floats(b, dpooled, grad);
      dfirst = pooler_->backward(b, dpooled, s.first);
    }
    for (int64_t i = 0; i < n; ++i) {
      Tensor row = dx.slice(s.rows[size_t(i)], s.rows[size_t(i)] + 1);
      b.add(row, dfirst.slice(i, i + 1), row);
    }
  }
  s = {};
}

}  // namespace megatron::model
