// The CUDA backend's cross-entropy over rows of logits, matching CpuBackend
// (tensor/cpu_cross_entropy.cpp): one block per row, 16-byte loads, an online max and sum of
// exponentials in f32; the backward (softmax - onehot) * dloss may overwrite the logits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common.cuh"
#include "kernels/ops.hpp"
#include "kernels/row_access.cuh"

namespace megatron::kernels {
namespace {

using tensor::DType;

// --- float storage whose dtype is known at run time: kernels/row_access.cuh ----------------------
// Logits, dloss and dlogits may each be any float dtype; a template per dtype would compile
// every combination, so the dtype is a (block-uniform) run-time value instead.
// Rows as slots of 8 elements (Slots) are there too.
using namespace rows;

__device__ __forceinline__ float load1(Floats f, int64_t i) {
  switch (f.kind) {
    case kBf16: return load(static_cast<const __nv_bfloat16*>(f.p), i);
    case kF16: return load(static_cast<const __half*>(f.p), i);
    default: return load(static_cast<const float*>(f.p), i);
  }
}

constexpr int kMaxThreads = 512;

// Threads for rows of v logits: about four slots each, whole warps.
unsigned threads_for(int64_t v) {
  const int64_t slots = (v + 7) / 8 + 1;
  const int64_t per = (slots + 3) / 4;
  return static_cast<unsigned>(std::clamp<int64_t>((per + 31) / 32 * 32, 32, kMaxThreads));
}

__device__ __forceinline__ float quiet_nan() { return __uint_as_float(0x7FC00000u); }

// (m, s): the largest value seen and the sum of exp(value - m) over the values seen; (-inf, 0)
// before any. absorb takes in the first `count` of v.
__device__ __forceinline__ void absorb(float& m, float& s, const float (&v)[8], int count) {
  float top = -INFINITY;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (e < count) top = fmaxf(top, v[e]);
  }
  if (top > m) {
    s *= expf(m - top);  // 0 while m is -inf
    m = top;
  }
  if (m == -INFINITY) return;  // nothing but -inf so far: the sum stays 0
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (e < count) s += expf(v[e] - m);
  }
}

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) return;  // both empty
  s = s * expf(m - top) + s2 * expf(m2 - top);
  m = top;
}

// Per row: lse = log sum exp(x) (as the CPU, max + log(sum exp(x - max)), here with the max
// found on the way), loss = lse - x[target - first] when the target lies in this shard's
// columns, else lse (a partial shard) or NaN (a whole vocabulary, where the CPU throws: the
// host cannot read the targets without waiting for the device).
__global__ void __launch_bounds__(kMaxThreads)
    cross_entropy_forward_kernel(Floats logits, const int32_t* targets, float* loss, float* lse,
                                 int64_t n, int64_t v, int64_t first, bool partial) {
  __shared__ float warp_max[32], warp_sum[32];
  const unsigned threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const Floats x = logits.at(row * v);
    const Slots slots(x, v);
    float m = -INFINITY, s = 0.0f;
    // Two slots at a time: both loads in flight before either is used.
    int64_t k = threadIdx.x;
    for (; k + threads < slots.count; k += 2 * threads) {
      const int64_t k2 = k + threads;
      const int count_a = slots.size(k), count_b = slots.size(k2);
      const Raw8 a = load_raw8(x, slots.start(k), count_a);
      const Raw8 b = load_raw8(x, slots.start(k2), count_b);
      float va[8], vb[8];
      to_floats(a, x.kind, va);
      to_floats(b, x.kind, vb);
      absorb(m, s, va, count_a);
      absorb(m, s, vb, count_b);
    }
    if (k < slots.count) {
      const int count = slots.size(k);
      float va[8];
      load8(x, slots.start(k), count, va);
      absorb(m, s, va, count);
    }
    // Lane 0's result of a butterfly, then the warps' results in warp order, by thread 0.
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float m2 = __shfl_xor_sync(0xFFFFFFFFu, m, offset);
      const float s2 = __shfl_xor_sync(0xFFFFFFFFu, s, offset);
      merge(m, s, m2, s2);
    }
    if ((threadIdx.x & 31) == 0) {
      warp_max[threadIdx.x >> 5] = m;
      warp_sum[threadIdx.x >> 5] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float top = warp_max[0], sum = warp_sum[0];
      for (unsigned w = 1; w < threads / 32; ++w) merge(top, sum, warp_max[w], warp_sum[w]);
      const float log_sum_exp = top + logf(sum);
      lse[row] = log_sum_exp;
      const int64_t t = int64_t{targets[row]} - first;
      if (t >= 0 && t < v) {
        loss[row] = log_sum_exp - load1(x, t);
      } else {
        loss[row] = partial ? log_sum_exp : quiet_nan();
      }
    }
    __syncthreads();  // warp_max and warp_sum are rewritten for the next row
  }
}

// dlogits = dloss * exp(x - lse), minus dloss at the target's column when it lies in this
// shard (a target outside a whole vocabulary makes the row NaN, as the forward's loss).
// Every element is read and written by the same thread, reads first: dlogits may be logits.
__global__ void __launch_bounds__(kMaxThreads)
    cross_entropy_backward_kernel(Floats logits, const int32_t* targets, const float* lse,
                                  Floats dloss, Floats dlogits, int64_t n, int64_t v,
                                  int64_t first, bool partial) {
  const unsigned threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const Floats x = logits.at(row * v), y = dlogits.at(row * v);
    const Slots slots(x, v);
    const float g = load1(dloss, row), log_sum_exp = lse[row];
    const int64_t t = int64_t{targets[row]} - first;
    const bool valid = partial || (t >= 0 && t < v);
    auto emit = [&](int64_t k, const Raw8& raw) {
      const int64_t start = slots.start(k);
      float xs[8], out[8];
      to_floats(raw, x.kind, xs);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        out[e] = g * expf(xs[e] - log_sum_exp);
        if (start + e == t) out[e] -= g;
        if (!valid) out[e] = quiet_nan();
      }
      store8(y, start, slots.size(k), out);
    };
    int64_t k = threadIdx.x;
    for (; k + threads < slots.count; k += 2 * threads) {
      const Raw8 a = load_raw8(x, slots.start(k), slots.size(k));
      const Raw8 b = load_raw8(x, slots.start(k + threads), slots.size(k + threads));
      emit(k, a);
      emit(k + threads, b);
    }
    if (k < slots.count) emit(k, load_raw8(x, slots.start(k), slots.size(k)));
  }
}

// --- host side -----------------------------------------------------------------------------------

struct Rows {
  int64_t n = 0;      // rows
  int64_t vocab = 0;  // columns
};

Rows check_rows(const Tensor& logits, const Tensor& targets, const char* op) {
  require_device(targets, op);
  require(targets.dtype() == DType::I32, op, "targets must be i32");
  floats(logits, op, "logits");
  const int64_t n = targets.numel();
  if (n == 0 && logits.numel() == 0) return {};
  if (n == 0 || logits.numel() % n != 0 || logits.numel() == 0) {
    fail(op, "logits " + tensor::to_string(logits.shape()) + " is not [targets, vocab]");
  }
  return {n, logits.numel() / n};
}

float* f32_rows(const Tensor& t, int64_t n, const char* op, const char* what) {
  require_device(t, op);
  require(t.dtype() == DType::F32 && t.numel() == n, op,
          std::string(what) + " must be f32 [" + std::to_string(n) + "]");
  return static_cast<float*>(t.raw());
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(n, int64_t{1} << 20));
}

}  // namespace

void cross_entropy_forward(cudaStream_t stream, const Tensor& logits, const Tensor& targets,
                           Tensor& loss, Tensor& lse, VocabShard shard) {
  const char* op = "cross_entropy_forward";
  const Rows rows = check_rows(logits, targets, op);
  float* loss_out = f32_rows(loss, rows.n, op, "loss");
  float* lse_out = f32_rows(lse, rows.n, op, "lse");
  if (rows.n == 0) return;
  cross_entropy_forward_kernel<<<blocks_for(rows.n), threads_for(rows.vocab), 0, stream>>>(
      floats(logits, op, "logits"), static_cast<const int32_t*>(targets.raw()), loss_out,
      lse_out, rows.n, rows.vocab, shard.first, shard.partial);
  check_launch(op);
}

void cross_entropy_backward(cudaStream_t stream, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dloss, Tensor& dlogits,
                            VocabShard shard) {
  const char* op = "cross_entropy_backward";
  const Rows rows = check_rows(logits, targets, op);
  const float* lse_in = f32_rows(lse, rows.n, op, "lse");
  require(dloss.numel() == rows.n, op, "dloss must have one value per row");
  require_numel(logits, dlogits, op);
  const Floats fdloss = floats(dloss, op, "dloss"), fdlogits = floats(dlogits, op, "dlogits");
  if (rows.n == 0) return;
  cross_entropy_backward_kernel<<<blocks_for(rows.n), threads_for(rows.vocab), 0, stream>>>(
      floats(logits, op, "logits"), static_cast<const int32_t*>(targets.raw()), lse_in, fdloss,
      fdlogits, rows.n, rows.vocab, shard.first, shard.partial);
  check_launch(op);
}

}  // namespace megatron::kernels
