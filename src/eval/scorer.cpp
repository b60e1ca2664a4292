#include "eval/scorer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "tensor/host_io.hpp"

namespace megatron::eval {
namespace {

// One request laid out as a sequence: inputs, the targets after each input, and from which
// position on the targets are the continuation's.
struct Laid {
  std::vector<int32_t> inputs, targets;
  size_t first_scored = 0;
};

Laid lay_out(const Request& r, int64_t max_length) {
  std::vector<int32_t> all = r.context;
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  // lm-evaluation-harness keeps the last max_length + 1 tokens.
  const size_t keep = std::min(all.size(), size_t(max_length) + 1);
  all.erase(all.begin(), all.end() - std::ptrdiff_t(keep));
  Laid l;
  l.inputs.assign(all.begin(), all.end() - 1);
  l.targets.assign(all.begin() + 1, all.end());
  l.first_scored = l.targets.size() - std::min(l.targets.size(), r.continuation.size());
  return l;
}

}  // namespace

std::vector<Score> score(const model::LanguageModel& model, tensor::Backend& backend,
                         const std::vector<Request>& requests, const ScorerOptions& o,
                         const ScoreProgress& progress) {
  for (const Request& r : requests) {
    if (r.continuation.empty() || r.context.size() + r.continuation.size() < 2) {
      throw std::invalid_argument("a request needs a continuation and one token before it");
    }
  }
  // Longest first: batches of similar length, and a memory problem shows at once.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].context.size() + requests[a].continuation.size() >
           requests[b].context.size() + requests[b].continuation.size();
  });
  std::vector<Score> out(requests.size());
  const model::Pass pass{.backend = backend, .training = false};
  for (size_t first = 0; first < order.size(); first += size_t(o.batch_size)) {
    const size_t count = std::min(order.size() - first, size_t(o.batch_size));
    std::vector<Laid> laid;
    int64_t seq = 1;
    for (size_t k = 0; k < count; ++k) {
      laid.push_back(lay_out(requests[order[first + k]], o.max_length));
      seq = std::max<int64_t>(seq, int64_t(laid.back().inputs.size()));
    }
    const int64_t rows = int64_t(count) * seq;
    std::vector<int32_t> tokens(size_t(rows), o.pad_token), labels(size_t(rows), 0);
    std::vector<int32_t> positions(static_cast<size_t>(rows), 0);
    for (size_t k = 0; k < count; ++k) {
      std::copy(laid[k].inputs.begin(), laid[k].inputs.end(), tokens.begin() + std::ptrdiff_t(k) * seq);
      std::copy(laid[k].targets.begin(), laid[k].targets.end(), labels.begin() + std::ptrdiff_t(k) * seq);
      for (int64_t t = 0; t < seq; ++t) positions[size_t(int64_t(k) * seq + t)] = int32_t(t);
    }
    const std::vector<float> mask(size_t(rows), 0.0f);
    const model::Batch batch{.batch = int64_t(count),
                             .seq = seq,
                             .tokens = tensor::from_ints(backend, tokens, {rows}),
                             .labels = tensor::from_ints(backend, labels, {rows}),
                             .loss_mask = tensor::from_floats(backend, mask, {rows}),
                             .positions = tensor::from_ints(backend, positions, {rows})};
    model::HeadOutputs outputs{.want_logits = true};
    model.forward(pass, batch, nullptr, &outputs);
    for (size_t k = 0; k < count; ++k) {
      Score& s = out[order[first + k]];
      for (size_t t = laid[k].first_scored; t < laid[k].targets.size(); ++t) {
        const int64_t row = int64_t(k) * seq + int64_t(t);
        const std::vector<float> logits = tensor::to_floats(backend, outputs.logits.slice(row, row + 1));
        const int32_t label = laid[k].targets[t];
        double max = -INFINITY;
        int64_t argmax = 0;
        for (int64_t v = 0; v < o.vocab_size; ++v) {
          if (logits[size_t(v)] > max) {
            max = logits[size_t(v)];
            argmax = v;
          }
        }
        double sum = 0.0;
        for (int64_t v = 0; v < o.vocab_size; ++v) sum += std::exp(double(logits[size_t(v)]) - max);
        s.logprob += double(logits[size_t(label)]) - max - std::log(sum);
        s.greedy = s.greedy && argmax == label;
        ++s.tokens;
      }
    }
    if (progress) progress(int64_t(first + count), int64_t(order.size()));
  }
  return out;
}

}  // namespace megatron::eval
