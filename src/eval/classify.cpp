#include "eval/classify.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/host_io.hpp"

namespace megatron::eval {

std::vector<int32_t> classify(const ForwardFn& forward, tensor::Backend& backend,
                              const data::SampleSource& rows, const train::BatchSpec& spec,
                              int64_t batch_size, int64_t classes, const ScoreGroups& groups,
                              const ScoreProgress& progress) {
  const int64_t n = rows.size();
  const int replicas = groups.dp ? groups.dp->size() : 1;
  const int replica = groups.dp ? groups.dp->rank() : 0;
  // Each answer as (class + 1) on the rank that speaks for its replica, 0 elsewhere: a sum over
  // the ranks gives every rank every answer.
  std::vector<float> answers(static_cast<size_t>(n), 0.0f);
  int64_t batch_index = 0;
  for (int64_t first = 0; first < n; first += batch_size, ++batch_index) {
    const int64_t count = std::min(batch_size, n - first);
    if (batch_index % replicas == replica) {
      const model::Batch batch = train::make_batch(backend, rows, first, count, spec);
      model::HeadOutputs outputs;
      if (forward(batch, outputs) && groups.reports) {
        if (outputs.sentence_logits.size() != size_t(count * classes)) {
          throw std::logic_error("the classifier gave another number of logits");
        }
        for (int64_t i = 0; i < count; ++i) {
          const float* l = outputs.sentence_logits.data() + i * classes;
          answers[size_t(first + i)] = float(std::max_element(l, l + classes) - l + 1);
        }
      }
    }
    if (progress) progress(first + count, n);
  }
  if (groups.world && groups.world->size() > 1) {
    tensor::Tensor t = tensor::from_floats(backend, answers, {n});
    groups.world->all_reduce(t);
    answers = tensor::to_floats(backend, t);
  }
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = int32_t(std::lround(answers[size_t(i)])) - 1;
  return out;
}

TaskResult classification_metrics(const data::ClassificationSet& set, const std::vector<int32_t>& predicted) {
  const size_t n = set.rows.size(), classes = set.labels.size();
  std::vector<double> tp(classes, 0.0), fp(classes, 0.0), fn(classes, 0.0);
  double right = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t gold = set.rows[i].label, got = predicted[i];
    if (got == gold) {
      right += 1.0;
      tp[size_t(gold)] += 1.0;
    } else {
      if (got >= 0 && size_t(got) < classes) fp[size_t(got)] += 1.0;
      fn[size_t(gold)] += 1.0;
    }
  }
  const auto f1 = [&](size_t k) {
    const double d = 2 * tp[k] + fp[k] + fn[k];
    return d > 0 ? 2 * tp[k] / d : 0.0;
  };
  const double acc = right / double(std::max<size_t>(n, 1));
  // The standard error of a mean of 0/1 values (sample standard deviation over sqrt(n)).
  const double sd = n > 1 ? std::sqrt(acc * (1 - acc) * double(n) / double(n - 1)) : 0.0;
  double macro = 0.0;
  for (size_t k = 0; k < classes; ++k) macro += f1(k);
  macro /= double(std::max<size_t>(classes, 1));
  TaskResult r{.task = "classification", .samples = int64_t(n)};
  r.metrics = {{.name = "acc", .value = acc, .std_error = n > 0 ? sd / std::sqrt(double(n)) : 0.0},
               {.name = "f1", .value = macro}};
  if (classes == 2) r.metrics.push_back({.name = "f1_" + set.labels[1], .value = f1(1)});
  return r;
}

}  // namespace megatron::eval
