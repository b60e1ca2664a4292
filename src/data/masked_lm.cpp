#include "data/masked_lm.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace megatron::data {

MaskedTokens mask_tokens(const std::vector<int32_t>& tokens, int64_t target_length,
                         const MaskingOptions& o,
                         const std::function<bool(int32_t)>& is_continuation,
                         NumpyRandomState& random) {
  // Candidates: words (or single pieces), never [CLS] or [SEP].
  std::vector<std::vector<int64_t>> candidates;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (id == o.cls || id == o.sep) continue;
    if (is_continuation(id) && o.full_word && !candidates.empty()) {
      candidates.back().push_back(int64_t(i));
    } else {
      candidates.push_back({int64_t(i)});
    }
  }
  // Python's round() rounds halves to even, as nearbyint does in the default rounding mode.
  const double budget = std::min(
      o.mask_prob * double(target_length),
      std::max(1.0, double(int64_t(std::nearbyint(double(tokens.size()) * o.mask_prob)))));

  std::vector<double> probs(size_t(o.max_ngram));
  double sum = 0.0;
  for (int32_t n = 1; n <= o.max_ngram; ++n) sum += probs[size_t(n - 1)] = 1.0 / double(n);
  for (double& p : probs) p /= sum;
  if (o.longer_ngrams) std::reverse(probs.begin(), probs.end());
  // Megatron normalises once more before each choice (every candidate has max_ngram n-grams).
  double again = 0.0;
  for (const double p : probs) again += p;
  for (double& p : probs) p /= again;

  // Candidate c's n-grams are candidates[c .. c + n) (fewer near the end), as in Megatron.
  std::vector<size_t> order(candidates.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  random.shuffle(order);

  MaskedTokens out{.tokens = tokens};
  std::vector<std::pair<int64_t, int32_t>> masked;
  std::set<int64_t> taken;
  for (const size_t c : order) {
    if (double(masked.size()) >= budget) break;
    int64_t n = o.geometric ? std::min<int64_t>(random.geometric(0.2), o.max_ngram)
                            : int64_t(random.choice(probs)) + 1;
    std::vector<int64_t> span;
    bool skip = false;
    while (true) {
      span.clear();
      for (size_t k = c; k < std::min(candidates.size(), c + size_t(n)); ++k) {
        span.insert(span.end(), candidates[k].begin(), candidates[k].end());
      }
      --n;
      if (budget >= double(masked.size() + span.size())) break;
      if (n == 0) {
        skip = true;
        break;
      }
    }
    if (skip) continue;
    if (std::any_of(span.begin(), span.end(), [&](int64_t i) { return taken.count(i) > 0; })) {
      continue;
    }
    for (const int64_t i : span) {
      taken.insert(i);
      const int32_t original = tokens[size_t(i)];
      if (!o.bert_replacement || random.random() < 0.8) {
        out.tokens[size_t(i)] = o.mask;
      } else if (random.random() >= 0.5) {
        out.tokens[size_t(i)] = int32_t(random.randint(0, o.vocab_size));
      }
      masked.emplace_back(i, original);
    }
    out.spans.push_back(std::move(span));
  }
  // Spans never overlap, so their first positions order them (Megatron sorts on that key).
  std::sort(out.spans.begin(), out.spans.end(),
            [](const auto& a, const auto& b) { return a.front() < b.front(); });
  std::sort(masked.begin(), masked.end());
  for (const auto& [position, label] : masked) {
    out.positions.push_back(position);
    out.labels.push_back(label);
  }
  return out;
}

}  // namespace megatron::data
