// One query's attention over n keys for the CPU backend's generation kernels (cached and paged):
// scores, a softmax in f32 and the weighted values, in one fixed order, so that a row's output
// depends only on its own keys and values, wherever they lie.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor::cpu {

// q [dim] (f32), key(j) and value(j) point at key and value j (dim elements of the cache's
// type); the result, out [dim], in that type. `scores` is scratch of at least n.
template <typename Key, typename Value, typename Out>
void attend_row(const std::vector<float>& q, int64_t n, float scale, const Key& key,
                const Value& value, std::vector<float>& scores, std::vector<float>& acc, Out* out) {
  const int64_t dim = int64_t(q.size());
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const auto* k = key(j);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < dim; ++d) dot += q[size_t(d)] * load(k, d);
    scores[size_t(j)] = dot * scale;
    max = std::max(max, scores[size_t(j)]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    scores[size_t(j)] = std::exp(scores[size_t(j)] - max);
    sum += scores[size_t(j)];
  }
  std::fill(acc.begin(), acc.end(), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const auto* v = value(j);
    const float p = scores[size_t(j)];
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) acc[size_t(d)] += p * load(v, d);
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < dim; ++d) store(out, d, acc[size_t(d)] * inv);
}

}  // namespace megatron::tensor::cpu
