// CpuBackend cross-entropy over rows of logits, one row per thread at a time: the max-shifted
// log-sum-exp forward and the softmax-minus-onehot backward, which may overwrite the logits.
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_fast_exp.hpp"

namespace megatron::tensor {
namespace {

// Below this many logits a call runs on the calling thread: waking the team costs more.
constexpr int64_t kParallelElements = 32768;

struct Rows {
  int64_t n = 0;      // rows
  int64_t vocab = 0;  // columns
  bool parallel() const { return n > 1 && n * vocab >= kParallelElements; }
};

Rows check_rows(const Tensor& logits, const Tensor& targets, VocabShard shard,
                const char* op) {
  cpu::require(targets.dtype() == DType::I32, op, "targets must be i32");
  cpu::with_floats(logits, [](const auto*) {});
  const int64_t n = targets.numel();
  if (n == 0 && logits.numel() == 0) return {};
  if (n == 0 || logits.numel() % n != 0 || logits.numel() == 0) {
    cpu::fail(op, "logits " + to_string(logits.shape()) + " is not [targets, vocab]");
  }
  const Rows rows{.n = n, .vocab = logits.numel() / n};
  if (shard.partial) return rows;  // targets in other shards are expected
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] < 0 || t[i] >= rows.vocab) {
      cpu::fail(op, "target " + std::to_string(t[i]) + " of row " + std::to_string(i) +
                        " outside the vocabulary of " + std::to_string(rows.vocab));
    }
  }
  return rows;
}

void check_f32_rows(const Tensor& x, int64_t n, const char* op, const char* what) {
  cpu::require(x.dtype() == DType::F32 && x.numel() == n, op,
               std::string(what) + " must be f32 [" + std::to_string(n) + "]");
}

// Row `i` of x as f32: in place for f32, else converted into scratch (bulk conversions, as
// 16-bit loads one by one do not vectorise).
const float* row_f32(const Tensor& x, int64_t i, int64_t width, float* scratch) {
  const size_t w = static_cast<size_t>(width);
  switch (x.dtype()) {
    case DType::F32:
      return x.data<float>() + i * width;
    case DType::Bf16:
      convert(std::span<const bf16>(x.data<bf16>() + i * width, w), {scratch, w});
      break;
    case DType::F16:
      convert(std::span<const f16>(x.data<f16>() + i * width, w), {scratch, w});
      break;
    default:
      cpu::fail("cross_entropy", "logits must be floats");
  }
  return scratch;
}

void store_row(const float* src, Tensor& x, int64_t i, int64_t width) {
  const size_t w = static_cast<size_t>(width);
  switch (x.dtype()) {
    case DType::F32: {
      float* dst = x.data<float>() + i * width;
      if (dst != src) std::memcpy(dst, src, w * sizeof(float));
      break;
    }
    case DType::Bf16:
      convert(std::span<const float>(src, w), {x.data<bf16>() + i * width, w});
      break;
    case DType::F16:
      convert(std::span<const float>(src, w), {x.data<f16>() + i * width, w});
      break;
    default:
      cpu::fail("cross_entropy", "dlogits must be floats");
  }
}

}  // namespace

void CpuBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                                       Tensor& lse, VocabShard shard) {
  const char* op = "cross_entropy_forward";
  const Rows rows = check_rows(logits, targets, shard, op);
  check_f32_rows(loss, rows.n, op, "loss");
  check_f32_rows(lse, rows.n, op, "lse");
  const int32_t* target = targets.data<int32_t>();
  float* loss_out = loss.data<float>();
  float* lse_out = lse.data<float>();
  const int64_t v = rows.vocab;
#pragma omp parallel num_threads(threads_) if (rows.parallel())
  {
    std::vector<float> scratch(logits.dtype() == DType::F32 ? 0 : static_cast<size_t>(v));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows.n; ++i) {
      const float* x = row_f32(logits, i, v, scratch.data());
      const float max = cpu::max_of(x, v, x[0]);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < v; ++j) sum += cpu::fast_exp(x[j] - max);
      const float log_sum_exp = max + std::log(sum);
      lse_out[i] = log_sum_exp;
      const int64_t t = target[i] - shard.first;
      loss_out[i] = log_sum_exp - (t >= 0 && t < v ? x[t] : 0.0f);
    }
  }
}

void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                        const Tensor& lse, const Tensor& dloss, Tensor& dlogits,
                                        VocabShard shard) {
  const char* op = "cross_entropy_backward";
  const Rows rows = check_rows(logits, targets, shard, op);
  check_f32_rows(lse, rows.n, op, "lse");
  cpu::require(dloss.numel() == rows.n, op, "dloss must have one value per row");
  cpu::require_numel(logits, dlogits, op);
  cpu::with_floats(dlogits, [](const auto*) {});
  const int32_t* target = targets.data<int32_t>();
  const float* lse_in = lse.data<float>();
  const int64_t v = rows.vocab;
  cpu::with_floats(dloss, [&](const auto* dl) {
#pragma omp parallel num_threads(threads_) if (rows.parallel())
    {
      const size_t scratch_size = static_cast<size_t>(v);
      std::vector<float> in(logits.dtype() == DType::F32 ? 0 : scratch_size);
      std::vector<float> out(dlogits.dtype() == DType::F32 ? 0 : scratch_size);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < rows.n; ++i) {
        // When dlogits is logits (f32), x and y are the same row: each element is read before
        // it is written, and nothing else reads it.
        const float* x = row_f32(logits, i, v, in.data());
        float* y = dlogits.dtype() == DType::F32 ? dlogits.data<float>() + i * v : out.data();
        const float g = cpu::load(dl, i);
        const float log_sum_exp = lse_in[i];
#pragma omp simd
        for (int64_t j = 0; j < v; ++j) y[j] = g * cpu::fast_exp(x[j] - log_sum_exp);
        const int64_t t = target[i] - shard.first;
        if (t >= 0 && t < v) y[t] -= g;
        store_row(y, dlogits, i, v);
      }
    }
  });
}

}  // namespace megatron::tensor
