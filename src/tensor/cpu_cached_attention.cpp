// CpuBackend::attention_cached: generation's attention over a key/value cache. A prefill (no
// cached tokens yet) is the ordinary causal attention, so it runs attention_forward's blocked
// kernel; later steps (usually one query per sequence) read the cache directly, one (sequence,
// head) per unit of work in a fixed order: bitwise the same on any number of threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu_attend_row.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"

namespace megatron::tensor {
namespace {

struct CacheLayout {
  int64_t batch, seq, heads, groups, dim, per_group, width, capacity;
  AttentionShape shape;
  int64_t query_column(int64_t head) const { return shape.query_column(head); }
  int64_t key_column(int64_t group) const { return shape.key_column(group); }
  // Offset of position t of (sequence b, group g) in a cache.
  int64_t cache_row(int64_t b, int64_t g, int64_t t) const {
    return ((b * groups + g) * capacity + t) * dim;
  }
};

// The new tokens' keys and values into the caches at positions start...
void append(const Tensor& qkv, const CacheLayout& l, int64_t start, Tensor& k_cache,
            Tensor& v_cache) {
  cpu::with_floats(qkv, [&](const auto* src) {
    for (Tensor* cache : {&k_cache, &v_cache}) {
      const int64_t shift = cache == &k_cache ? 0 : l.dim;
      cpu::with_floats(*cache, [&](auto* dst) {
        for (int64_t b = 0; b < l.batch; ++b)
          for (int64_t t = 0; t < l.seq; ++t)
            for (int64_t g = 0; g < l.groups; ++g) {
              const auto* in = src + (b * l.seq + t) * l.width + l.key_column(g) + shift;
              auto* out = dst + l.cache_row(b, g, start + t);
              for (int64_t d = 0; d < l.dim; ++d) cpu::store(out, d, cpu::load(in, d));
            }
      });
    }
  });
}

}  // namespace

void CpuBackend::attention_cached(const Tensor& qkv, const AttentionShape& shape, int64_t start,
                                  float scale, Tensor& k_cache, Tensor& v_cache, Tensor& out) {
  const char* op = "attention_cached";
  cpu::require(shape.batch >= 0 && shape.seq >= 0 && shape.head_dim > 0 && shape.groups > 0 &&
                   shape.heads > 0 && shape.heads % shape.groups == 0,
               op, "bad shape (heads must be a positive multiple of groups)");
  const CacheLayout l{.batch = shape.batch,
                      .seq = shape.seq,
                      .heads = shape.heads,
                      .groups = shape.groups,
                      .dim = shape.head_dim,
                      .per_group = shape.heads / shape.groups,
                      .width = shape.qkv_width(),
                      .capacity = k_cache.shape().size() == 4 ? k_cache.dim(2) : 0,
                      .shape = shape};
  cpu::require(qkv.numel() == l.batch * l.seq * l.width, op,
               "qkv " + to_string(qkv.shape()) + " does not match the shape");
  cpu::require(out.numel() == l.batch * l.seq * l.heads * l.dim, op,
               "out " + to_string(out.shape()) + " does not match the shape");
  const Shape cache_shape{l.batch, l.groups, l.capacity, l.dim};
  cpu::require(k_cache.shape() == cache_shape && v_cache.shape() == cache_shape &&
                   k_cache.dtype() == v_cache.dtype(),
               op, "the caches must both be [batch, groups, capacity, head_dim] of one dtype");
  cpu::require(start >= 0 && start + l.seq <= l.capacity, op,
               "positions " + std::to_string(start) + ".." + std::to_string(start + l.seq) +
                   " do not fit a cache of " + std::to_string(l.capacity));
  append(qkv, l, start, k_cache, v_cache);
  if (start == 0) {
    Tensor lse = empty({l.batch, l.heads, l.seq}, DType::F32);
    attention_forward(qkv, shape, {.scale = scale, .causal = true}, out, lse);
    return;
  }
  const int64_t units = l.batch * l.heads;
  const int64_t keys = start + l.seq;
  const bool parallel = units > 1 && units * l.seq * keys * l.dim >= (int64_t{1} << 16);
  cpu::with_floats(qkv, [&](const auto* q_all) {
    cpu::with_floats(k_cache, [&](const auto* k_all) {
      const auto* v_all = static_cast<decltype(k_all)>(v_cache.raw());
      cpu::with_floats(out, [&](auto* o_all) {
#pragma omp parallel num_threads(threads_) if (parallel)
        {
          std::vector<float> q(static_cast<size_t>(l.dim)), o(static_cast<size_t>(l.dim)),
              s(static_cast<size_t>(keys));
#pragma omp for schedule(static)
          for (int64_t unit = 0; unit < units; ++unit) {
            const int64_t b = unit / l.heads, h = unit % l.heads, g = h / l.per_group;
            const auto* kc = k_all + l.cache_row(b, g, 0);
            const auto* vc = v_all + l.cache_row(b, g, 0);
            for (int64_t t = 0; t < l.seq; ++t) {
              const auto* qrow = q_all + (b * l.seq + t) * l.width + l.query_column(h);
              for (int64_t d = 0; d < l.dim; ++d) q[size_t(d)] = cpu::load(qrow, d);
              const int64_t n = start + t + 1;  // causal: keys up to this query's position
              cpu::attend_row(
                  q, n, scale, [&](int64_t j) { return kc + j * l.dim; },
                  [&](int64_t j) { return vc + j * l.dim; }, s, o,
                  o_all + (b * l.seq + t) * l.heads * l.dim + h * l.dim);
            }
          }
        }
      });
    });
  });
}

}  // namespace megatron::tensor
