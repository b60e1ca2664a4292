#include "generate/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace megatron::generate {

namespace {

double log_sum_exp(std::span<const float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (const float v : x) sum += std::exp(double(v) - double(max));
  return double(max) + std::log(sum);
}

}  // namespace

Sampling sampling_for(double temperature, int64_t top_k, double top_p) {
  if (temperature == 0.0) return {.temperature = 1.0, .top_k = 1, .top_p = top_p};
  return {.temperature = temperature, .top_k = top_k, .top_p = top_p};
}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t sample(std::span<const float> logits, const Sampling& s, Rng& rng) {
  if (s.greedy()) return argmax(logits);
  const size_t n = logits.size();
  std::vector<float> x(logits.begin(), logits.end());
  // As Megatron: the division in f32, then the masks on the scaled logits.
  for (float& v : x) v = float(double(v) / s.temperature);
  // A temperature so small that the largest logit divided by it leaves f32's range (an
  // accepted 1e-38, 1e-300) would subtract inf from inf below: its limit, the argmax, instead.
  if (!std::isfinite(*std::max_element(x.begin(), x.end()))) return argmax(logits);
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; lower ids first on ties, so the kept set never depends on the sort.
  const auto by_logit = [&](int32_t a, int32_t b) {
    return x[size_t(a)] > x[size_t(b)] || (x[size_t(a)] == x[size_t(b)] && a < b);
  };
  size_t kept = n;
  if (s.top_k <= 1 && s.top_p <= 0.0) {
    // Every token stays: draw in id order, no sort (the whole vocabulary per token otherwise).
    const float max = *std::max_element(x.begin(), x.end());
    std::vector<double> p(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += p[i] = std::exp(double(x[i]) - max);
    double u = rng.uniform() * total;
    for (size_t i = 0; i < n; ++i) {
      if (u < p[i]) return int32_t(i);
      u -= p[i];
    }
    // Rounding left u at the very end: the last token that has any probability.
    size_t last = n - 1;
    while (last > 0 && p[last] == 0.0) --last;
    return int32_t(last);
  }
  if (s.top_k > 1 && size_t(s.top_k) < n) {
    std::nth_element(order.begin(), order.begin() + (s.top_k - 1), order.end(), by_logit);
    const float kth = x[size_t(order[size_t(s.top_k - 1)])];
    // Megatron masks logits below the k-th: ties with it stay.
    kept = 0;
    for (size_t i = 0; i < n; ++i)
      if (x[i] >= kth) order[kept++] = int32_t(i);
    std::sort(order.begin(), order.begin() + ptrdiff_t(kept), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  const float max = x[size_t(order[0])];
  std::vector<double> p(kept);
  double total = 0.0;
  for (size_t i = 0; i < kept; ++i) total += p[i] = std::exp(double(x[size_t(order[i])]) - max);
  if (s.top_p > 0.0) {
    // Sorted cumulative probability; a token is dropped when the mass before it already
    // exceeds top_p (Megatron shifts its "> top_p" mask right by one: the first always stays).
    double before = 0.0;
    size_t keep = 0;
    while (keep < kept && (keep == 0 || before <= s.top_p)) before += p[keep++] / total;
    kept = keep;
    total = 0.0;
    for (size_t i = 0; i < kept; ++i) total += p[i];
  }
  double u = rng.uniform() * total;
  for (size_t i = 0; i < kept; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[kept - 1];  // rounding left u at the very end
}

double log_probability(std::span<const float> logits, int32_t token) {
  return double(logits[size_t(token)]) - log_sum_exp(logits);
}

std::vector<std::pair<int32_t, double>> top_log_probabilities(std::span<const float> logits,
                                                              int64_t n) {
  const double lse = log_sum_exp(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min(order.size(), size_t(std::max<int64_t>(n, 0)));
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(k), order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < k; ++i) out.emplace_back(order[i], double(logits[size_t(order[i])]) - lse);
  return out;
}

}  // namespace megatron::generate
