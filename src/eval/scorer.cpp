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

// Each row's largest logit and the first column holding it (torch.argmax's choice), over a
// block of rows of `width` columns starting at vocabulary column `first`.
std::vector<float> row_maxima(const std::vector<float>& logits, size_t width, int64_t first) {
  const size_t rows = width == 0 ? 0 : logits.size() / width;
  std::vector<float> out(rows * 2);
  for (size_t i = 0; i < rows; ++i) {
    const float* row = logits.data() + i * width;
    const size_t at = size_t(std::max_element(row, row + width) - row);
    out[2 * i] = row[at];
    out[2 * i + 1] = float(first + int64_t(at));  // < 2^24: a vocabulary index
  }
  return out;
}

}  // namespace

std::vector<float> argmax_over_shards(tensor::Backend& backend, const model::HeadOutputs& outputs,
                                      dist::Communicator* tp) {
  const size_t width = size_t(outputs.logits.shape()[1]);
  std::vector<float> maxima = row_maxima(tensor::to_floats(backend, outputs.logits), width, outputs.vocab_first);
  const int tp_size = tp ? tp->size() : 1;
  if (tp_size == 1) return maxima;
  const size_t n = maxima.size() / 2;
  const tensor::Tensor mine_t = tensor::from_floats(backend, maxima, {int64_t(maxima.size())});
  tensor::Tensor all = backend.empty({int64_t(maxima.size()) * tp_size}, tensor::DType::F32);
  tp->all_gather(mine_t, all);
  const std::vector<float> shards = tensor::to_floats(backend, all);
  std::copy_n(shards.begin(), maxima.size(), maxima.begin());  // shard 0's
  for (size_t i = 0; i < n; ++i) {
    for (int r = 1; r < tp_size; ++r) {
      const float* m = shards.data() + (size_t(r) * n + i) * 2;
      if (m[0] > maxima[2 * i]) std::copy_n(m, 2, maxima.begin() + std::ptrdiff_t(2 * i));
    }
  }
  return maxima;
}

namespace {

// Every replica's scores on every rank: each request's score comes from one rank, so a sum over
// the ranks of (f32 high part, f32 remainder) adds only zeros to it: the double keeps about
// 48 bits (1e-14 relative) of the replica's.
void share_scores(tensor::Backend& backend, dist::Communicator& world, std::vector<Score>& scores,
                  const std::vector<bool>& mine) {
  std::vector<float> packed(scores.size() * 4, 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!mine[i]) continue;
    const float hi = float(scores[i].logprob);
    packed[4 * i] = hi;
    packed[4 * i + 1] = float(scores[i].logprob - double(hi));
    packed[4 * i + 2] = scores[i].greedy ? 1.0f : 0.0f;
    packed[4 * i + 3] = float(scores[i].tokens);  // < 2^24: a request is one sequence
  }
  tensor::Tensor t = tensor::from_floats(backend, packed, {int64_t(packed.size())});
  world.all_reduce(t);
  packed = tensor::to_floats(backend, t);
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = {.logprob = double(packed[4 * i]) + double(packed[4 * i + 1]),
                 .greedy = packed[4 * i + 2] > 0.5f,
                 .tokens = int64_t(packed[4 * i + 3])};
  }
}

}  // namespace

std::vector<Score> score(const ForwardFn& forward, tensor::Backend& backend,
                         const std::vector<Request>& requests, const ScorerOptions& o,
                         const ScoreProgress& progress, const ScoreGroups& groups) {
  for (const Request& r : requests) {
    if (r.continuation.empty() || r.context.size() + r.continuation.size() < 2) {
      throw std::invalid_argument("a request needs a continuation and one token before it");
    }
  }
  const int replicas = groups.dp ? groups.dp->size() : 1;
  const int replica = groups.dp ? groups.dp->rank() : 0;
  const int tp_size = groups.tp ? groups.tp->size() : 1;
  // Longest first: batches of similar length, and a memory problem shows at once.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].context.size() + requests[a].continuation.size() >
           requests[b].context.size() + requests[b].continuation.size();
  });
  std::vector<Score> out(requests.size());
  std::vector<bool> mine(requests.size(), false);
  size_t batch_index = 0;
  for (size_t first = 0; first < order.size(); first += size_t(o.batch_size), ++batch_index) {
    if (int(batch_index % size_t(replicas)) != replica) continue;
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
    // The scored rows and their labels: only they get logits.
    std::vector<int32_t> scored_rows, scored_labels;
    for (size_t k = 0; k < count; ++k) {
      for (size_t t = laid[k].first_scored; t < laid[k].targets.size(); ++t) {
        scored_rows.push_back(int32_t(int64_t(k) * seq + int64_t(t)));
        scored_labels.push_back(laid[k].targets[t]);
      }
    }
    const int64_t n = int64_t(scored_rows.size());
    const std::vector<float> mask(size_t(rows), 0.0f);
    const model::Batch batch{.batch = int64_t(count),
                             .seq = seq,
                             .tokens = tensor::from_ints(backend, tokens, {rows}),
                             .labels = tensor::from_ints(backend, labels, {rows}),
                             .loss_mask = tensor::from_floats(backend, mask, {rows}),
                             .positions = tensor::from_ints(backend, positions, {rows})};
    model::HeadOutputs outputs{.want_logits = o.greedy,
                               .score_rows = tensor::from_ints(backend, scored_rows, {n}),
                               .score_labels = tensor::from_ints(backend, scored_labels, {n}),
                               .score_vocab = o.vocab_size};
    if (!forward(batch, outputs)) {  // a stage before the last: its scores come from the last
      if (progress) progress(int64_t(first + count), int64_t(order.size()));
      continue;
    }
    const std::vector<float> logprobs = tensor::to_floats(backend, outputs.label_logprobs);
    // Greedy: the label is the argmax over the whole vocabulary, the first of the shards'
    // maxima (shards in column order) where they tie.
    std::vector<float> maxima;
    if (o.greedy) maxima = argmax_over_shards(backend, outputs, tp_size > 1 ? groups.tp : nullptr);
    size_t i = 0;
    for (size_t k = 0; k < count; ++k) {
      Score& s = out[order[first + k]];
      mine[order[first + k]] = true;
      for (size_t t = laid[k].first_scored; t < laid[k].targets.size(); ++t, ++i) {
        s.logprob += double(logprobs[i]);
        if (o.greedy) s.greedy = s.greedy && int64_t(maxima[2 * i + 1]) == laid[k].targets[t];
        ++s.tokens;
      }
    }
    if (progress) progress(int64_t(first + count), int64_t(order.size()));
  }
  if (groups.world && groups.world->size() > 1) {
    if (!groups.reports) mine.assign(mine.size(), false);
    share_scores(backend, *groups.world, out, mine);
  }
  // A replica's own last batch need not be the last one: the line ends when all have.
  if (progress && replicas > 1) progress(int64_t(order.size()), int64_t(order.size()));
  return out;
}

}  // namespace megatron::eval
