// Many tensors per launch: the AdamW step over every parameter of a model (with the copy into
// the model's dtype fused in) and the sum of squares behind the gradient norm.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/multi_tensor_plan.hpp"
#include "kernels/ops.hpp"

namespace megatron::kernels {
namespace {

using tensor::DType;

// Each block handles one chunk of one tensor. A launch describes its tensors and blocks in its
// parameters (kernels take up to 32 KiB of parameters since CUDA 12.1 on Volta and later), so
// there is no descriptor copy before it.
constexpr int kMaxTensors = 96;
constexpr int kMaxBlocks = 320;
constexpr int64_t kChunk = 65536;
constexpr int kThreads = 512;

enum Kind : uint8_t { kF32, kBf16, kF16 };

Kind kind_of(DType dtype) {
  return dtype == DType::Bf16 ? kBf16 : dtype == DType::F16 ? kF16 : kF32;
}

__device__ __forceinline__ float load_any(const void* p, Kind kind, int64_t i) {
  switch (kind) {
    case kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_any(void* p, Kind kind, int64_t i, float v) {
  switch (kind) {
    case kBf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

struct Blocks {
  int tensor[kMaxBlocks];
  int chunk[kMaxBlocks];
  int count = 0;
};

// --- AdamW -------------------------------------------------------------------------------------

struct AdamWTable {
  float* master[kMaxTensors];
  const void* grad[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  void* value[kMaxTensors];  // nullptr: the master is the value
  int64_t n[kMaxTensors];
  float decay[kMaxTensors];  // 1 - lr * weight_decay
  Kind grad_kind[kMaxTensors];
  Kind value_kind[kMaxTensors];
  Blocks blocks;
  int tensors = 0;
  // As the CPU backend's AdamWCoefficients (tensor/cpu_optimizer.cpp).
  float beta1, beta2, eps, grad_scale, step_size, bias2_sqrt;
};

// The CPU's arithmetic in the same order, each operation rounded on its own (no fused
// multiply-adds): the update is bit-for-bit the CPU backend's for the same inputs.
__global__ void __launch_bounds__(kThreads) adamw_many_kernel(AdamWTable t) {
  const int slot = t.blocks.tensor[blockIdx.x];
  const int64_t begin = int64_t(t.blocks.chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(begin + kChunk, t.n[slot]);
  float* w = t.master[slot];
  float* ms = t.m[slot];
  float* vs = t.v[slot];
  const void* g = t.grad[slot];
  void* value = t.value[slot];
  const float decay = t.decay[slot];
  const float one_minus_beta1 = __fsub_rn(1.0f, t.beta1);
  const float one_minus_beta2 = __fsub_rn(1.0f, t.beta2);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float gi = __fmul_rn(load_any(g, t.grad_kind[slot], i), t.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(t.beta1, ms[i]), __fmul_rn(one_minus_beta1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(t.beta2, vs[i]), __fmul_rn(__fmul_rn(one_minus_beta2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), t.bias2_sqrt), t.eps);
    const float wi = __fsub_rn(__fmul_rn(w[i], decay), __fmul_rn(t.step_size, __fdiv_rn(mi, denom)));
    w[i] = wi;
    ms[i] = mi;
    vs[i] = vi;
    if (value) store_any(value, t.value_kind[slot], i, wi);
  }
}

void require_f32(const Tensor& t, const Tensor& master, const char* what) {
  const char* op = "adamw_update_many";
  require(t.dtype() == DType::F32, op,
          std::string(what) + " must be f32, got " + std::string(tensor::name(t.dtype())));
  require_numel(master, t, op);
  require_device(t, op);
}

// --- sum of squares ----------------------------------------------------------------------------

struct SquaresTable {
  const void* x[kMaxTensors];
  int64_t n[kMaxTensors];
  Kind kind[kMaxTensors];
  Blocks blocks;
  int tensors = 0;
  double* partials = nullptr;  // one per block of this launch
};

__device__ double block_sum(double value) {
  __shared__ double warps[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = value;
  __syncthreads();
  value = threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  }
  return value;  // valid in thread 0
}

__global__ void __launch_bounds__(kThreads) squares_many_kernel(SquaresTable t) {
  const int slot = t.blocks.tensor[blockIdx.x];
  const int64_t begin = int64_t(t.blocks.chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(begin + kChunk, t.n[slot]);
  double sum = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double x = load_any(t.x[slot], t.kind[slot], i);
    sum += x * x;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) t.partials[blockIdx.x] = sum;
}

// Sums `count` partials in a fixed order (each thread a fixed stride, then the block tree).
__global__ void __launch_bounds__(kThreads) sum_partials_kernel(const double* partials,
                                                                 int64_t count, double* out) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}

// Calls launch(first, last) for each launch of the plan, with `blocks` holding its blocks.
template <typename Launch>
void for_launches(const std::vector<int64_t>& sizes, Blocks& blocks, Launch&& launch) {
  for (const MultiTensorLaunch& l :
       plan_multi_tensor_launches(sizes, kChunk, kMaxTensors, kMaxBlocks)) {
    blocks.count = int(l.blocks.size());
    for (int b = 0; b < blocks.count; ++b) {
      blocks.tensor[b] = l.blocks[size_t(b)].slot;
      blocks.chunk[b] = l.blocks[size_t(b)].chunk;
    }
    launch(l.first, l.last);
  }
}

}  // namespace

void adamw_update_many(cudaStream_t stream, std::span<const tensor::AdamWParam> params,
                       const AdamWStep& step) {
  const char* op = "adamw_update_many";
  require(step.step >= 1, op, "step is 1-based, got " + std::to_string(step.step));
  std::vector<int64_t> sizes;
  for (const tensor::AdamWParam& p : params) {
    require_f32(p.master, p.master, "master");
    require_f32(p.m, p.master, "m");
    require_f32(p.v, p.master, "v");
    require_numel(p.master, p.grad, op);
    require_device(p.grad, op);
    require(tensor::is_floating(p.grad.dtype()), op, "the gradient must be a float tensor");
    if (p.value.defined()) {
      require_numel(p.master, p.value, op);
      require_device(p.value, op);
      require(tensor::is_floating(p.value.dtype()), op, "the value must be a float tensor");
    }
    sizes.push_back(p.master.numel());
  }
  AdamWTable table{};
  const double bias1 = 1.0 - std::pow(double{step.beta1}, double(step.step));
  const double bias2 = 1.0 - std::pow(double{step.beta2}, double(step.step));
  table.beta1 = step.beta1;
  table.beta2 = step.beta2;
  table.eps = step.eps;
  table.grad_scale = step.grad_scale;
  table.step_size = static_cast<float>(double{step.lr} / bias1);
  table.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  for_launches(sizes, table.blocks, [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      const tensor::AdamWParam& p = params[i];
      const size_t s = i - first;
      table.master[s] = static_cast<float*>(p.master.raw());
      table.grad[s] = p.grad.raw();
      table.m[s] = static_cast<float*>(p.m.raw());
      table.v[s] = static_cast<float*>(p.v.raw());
      table.value[s] = p.value.defined() ? p.value.raw() : nullptr;
      table.n[s] = p.master.numel();
      table.decay[s] = 1.0f - step.lr * p.weight_decay;
      table.grad_kind[s] = kind_of(p.grad.dtype());
      table.value_kind[s] = p.value.defined() ? kind_of(p.value.dtype()) : kF32;
    }
    table.tensors = int(last - first);
    adamw_many_kernel<<<table.blocks.count, kThreads, 0, stream>>>(table);
    check_launch(op);
  });
}

double sum_squares_many(cudaStream_t stream, Workspace& workspace, std::span<const Tensor> xs) {
  const char* op = "sum_squares_many";
  std::vector<int64_t> sizes;
  int64_t chunks = 0;
  for (const Tensor& x : xs) {
    require_device(x, op);
    require(tensor::is_floating(x.dtype()), op, "expected float tensors");
    sizes.push_back(x.numel());
    chunks += (x.numel() + kChunk - 1) / kChunk;
  }
  if (chunks == 0) return 0.0;
  auto* partials = static_cast<double*>(
      workspace.get(size_t(chunks + 1) * sizeof(double), stream));
  SquaresTable table{};
  int64_t done = 0;
  for_launches(sizes, table.blocks, [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      table.x[i - first] = xs[i].raw();
      table.n[i - first] = xs[i].numel();
      table.kind[i - first] = kind_of(xs[i].dtype());
    }
    table.tensors = int(last - first);
    table.partials = partials + done;
    squares_many_kernel<<<table.blocks.count, kThreads, 0, stream>>>(table);
    check_launch(op);
    done += table.blocks.count;
  });
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, chunks, partials + chunks);
  check_launch(op);
  double result = 0.0;
  check_cuda(cudaMemcpyAsync(&result, partials + chunks, sizeof result, cudaMemcpyDeviceToHost,
                             stream),
             "sum_squares_many: copy to the host");
  check_cuda(cudaStreamSynchronize(stream), "sum_squares_many");
  return result;
}

}  // namespace megatron::kernels
