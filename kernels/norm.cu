// The CUDA backend's layer norm and RMS norm over the last dimension, matching CpuBackend
// (tensor/cpu_norm.cpp): one block per row with the row held in registers and statistics in f32;
// parameter gradients are summed per block of rows, then across blocks in a fixed order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/add_partials.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"
#include "kernels/row_access.cuh"

namespace megatron::kernels {
namespace {

using tensor::DType;

// --- float storage whose dtype is known at run time: kernels/row_access.cuh ----------------------
// A norm takes up to four float tensors whose dtypes vary independently; a template per dtype
// would compile every combination, so the dtype is a (block-uniform) run-time value instead.
// Rows as slots of 8 elements (Slots) are there too.
using namespace rows;

// Floats of a column sum in shared memory, one padding word per 8 columns (see
// norm_backward_kernel).
__host__ __device__ constexpr int64_t padded(int64_t c) { return c + (c >> 3) + 1; }

// Slots per thread kept in registers across a row's passes; slots beyond are read again.
constexpr int kCached = 2;
constexpr int kForwardThreads = 1024;
constexpr int kBackwardThreads = 512;

// Threads for rows of c: about kCached slots each, whole warps.
unsigned threads_for(int64_t c, int max_threads) {
  const int64_t slots = (c + 7) / 8 + 1;
  const int64_t per = (slots + kCached - 1) / kCached;
  return static_cast<unsigned>(std::clamp<int64_t>((per + 31) / 32 * 32, 32, max_threads));
}

// Sums v over the block (blockDim.x a multiple of 32), the same total in every thread and on
// every run: a butterfly within each warp, then the warps' sums in warp order. scratch holds
// 32 * N floats and may be reused as soon as this returns.
template <int N>
__device__ __forceinline__ void block_sum(float (&v)[N], float* scratch) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v[k] += __shfl_xor_sync(0xFFFFFFFFu, v[k], offset);
  }
  const int warp = static_cast<int>(threadIdx.x >> 5);
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) scratch[warp * N + k] = v[k];
  }
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float total = scratch[k];
    for (int w = 1; w < warps; ++w) total += scratch[w * N + k];
    v[k] = total;
  }
  __syncthreads();
}

// --- forward -------------------------------------------------------------------------------------

// y = (x - mean) rstd gamma + beta (layer norm) or x rstd gamma (RMS norm), rows grid-strided.
// The statistics are formed as the CPU forms them: mean = sum / c, var = sum (x - mean)^2 / c,
// rstd = 1 / sqrt(var + eps) (RMS: 1 / sqrt(sum x^2 / c + eps)), IEEE division and square root.
__global__ void __launch_bounds__(kForwardThreads)
    norm_forward_kernel(Floats x, Floats gamma, Floats beta, Floats y, float* mean, float* rstd,
                        int64_t n, int64_t c, float eps, bool rms) {
  __shared__ float scratch[32];
  const float width = static_cast<float>(c);
  const unsigned threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const Floats xr = x.at(row * c), yr = y.at(row * c);
    const Slots slots(xr, c);
    float v[kCached][8];
    {
      Raw8 raw[kCached];
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t s = threadIdx.x + int64_t{k} * threads;
        raw[k] = load_raw8(xr, slots.start(s), slots.size(s));
      }
#pragma unroll
      for (int k = 0; k < kCached; ++k) to_floats(raw[k], xr.kind, v[k]);
    }
    const int64_t uncached = threadIdx.x + int64_t{kCached} * threads;

    // Pass 1: sum x (sum x^2 for RMS); elements past a slot's end are zero.
    float sum[1] = {0.0f};
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[0] += rms ? v[k][e] * v[k][e] : v[k][e];
    }
    for (int64_t s = uncached; s < slots.count; s += threads) {
      float u[8];
      load8(xr, slots.start(s), slots.size(s), u);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[0] += rms ? u[e] * u[e] : u[e];
    }
    block_sum(sum, scratch);

    float mu = 0.0f, rs = 0.0f;
    if (rms) {
      rs = 1.0f / sqrtf(sum[0] / width + eps);
    } else {
      // Pass 2: sum (x - mean)^2 over the row's own elements only.
      mu = sum[0] / width;
      float squares[1] = {0.0f};
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int count = slots.size(threadIdx.x + int64_t{k} * threads);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = v[k][e] - mu;
          if (e < count) squares[0] += d * d;
        }
      }
      for (int64_t s = uncached; s < slots.count; s += threads) {
        const int count = slots.size(s);
        float u[8];
        load8(xr, slots.start(s), count, u);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = u[e] - mu;
          if (e < count) squares[0] += d * d;
        }
      }
      block_sum(squares, scratch);
      rs = 1.0f / sqrtf(squares[0] / width + eps);
    }

    // Pass 3: the output, slot by slot.
    auto emit = [&](int64_t start, int count, const float (&xs)[8]) {
      const Raw8 raw_g = load_raw8(gamma, start, count);
      const Raw8 raw_b = load_raw8(beta, start, rms ? 0 : count);
      float g[8], b[8], out[8];
      to_floats(raw_g, gamma.kind, g);
      to_floats(raw_b, beta.kind, b);
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = rms ? xs[e] * rs * g[e] : (xs[e] - mu) * rs * g[e] + b[e];
      store8(yr, start, count, out);
    };
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t s = threadIdx.x + int64_t{k} * threads;
      emit(slots.start(s), slots.size(s), v[k]);
    }
    for (int64_t s = uncached; s < slots.count; s += threads) {
      float u[8];
      load8(xr, slots.start(s), slots.size(s), u);
      emit(slots.start(s), slots.size(s), u);
    }
    if (threadIdx.x == 0) {
      if (!rms) mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// --- backward ------------------------------------------------------------------------------------

// Block b takes rows [b * rows_per_block, ...) in order. Per row (as the CPU):
//   xhat = (x - mean) rstd (RMS: x rstd), g = dy gamma,
//   dx = rstd (g - mean(g) - xhat mean(g xhat))   (RMS: rstd (g - xhat mean(g xhat))),
// and the block's partial parameter gradients add dy xhat (dgamma) and dy (dbeta), column by
// column in row order, in shared memory when they fit (else in the block's slice of `partial`),
// ending in partial[b * parts * c, ...) for add_partials_kernel. In shared memory column j sits
// at j + j / 8: a warp's threads add 8 consecutive columns each, which a plain layout would put
// 8 to a bank.
__global__ void __launch_bounds__(kBackwardThreads)
    norm_backward_kernel(Floats dy, Floats x, Floats gamma, const float* mean, const float* rstd,
                         Floats dx, float* partial, int64_t n, int64_t c, int64_t rows_per_block,
                         bool rms, bool shared_partial) {
  extern __shared__ float shared_sums[];
  __shared__ float scratch[32 * 2];
  const int64_t parts = rms ? 1 : 2;
  float* block_partial = partial + blockIdx.x * parts * c;
  float* pg = shared_partial ? shared_sums : block_partial;
  const int64_t stride = shared_partial ? padded(c) : c;
  float* pb = pg + stride;  // layer norm only
  auto at = [shared_partial](int64_t j) { return shared_partial ? j + (j >> 3) : j; };
  const unsigned threads = blockDim.x;
  for (int64_t j = threadIdx.x; j < parts * stride; j += threads) pg[j] = 0.0f;
  __syncthreads();

  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t row0 = blockIdx.x * rows_per_block;
  const int64_t row1 = min(n, row0 + rows_per_block);
  for (int64_t row = row0; row < row1; ++row) {
    const Floats xr = x.at(row * c), dyr = dy.at(row * c), dxr = dx.at(row * c);
    const Slots slots(xr, c);
    const float mu = rms ? 0.0f : mean[row], rs = rstd[row];
    const int64_t uncached = threadIdx.x + int64_t{kCached} * threads;

    // xhat and g of one slot; with `accumulate`, its dy xhat and dy join the partial sums (the
    // same column of consecutive rows may belong to different threads: the barriers inside
    // block_sum order one row's additions before the next row's).
    float sums[2] = {0.0f, 0.0f};  // sum g, sum g xhat
    auto prepare = [&](int64_t start, int count, const Raw8& raw_x, const Raw8& raw_dy,
                       const Raw8& raw_g, float (&xhat)[8], float (&g)[8], bool accumulate) {
      float xs[8], d[8], gm[8];
      to_floats(raw_x, x.kind, xs);
      to_floats(raw_dy, dy.kind, d);
      to_floats(raw_g, gamma.kind, gm);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xhat[e] = rms ? xs[e] * rs : (xs[e] - mu) * rs;
        g[e] = d[e] * gm[e];  // zero past the slot's end
      }
      if (accumulate) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (e < count) {
            pg[at(start + e)] += d[e] * xhat[e];
            if (!rms) pb[at(start + e)] += d[e];
          }
          sums[0] += g[e];
          sums[1] += g[e] * xhat[e];
        }
      }
    };
    auto load_slot = [&](int64_t s, float (&xhat)[8], float (&g)[8], bool accumulate) {
      const int64_t start = slots.start(s);
      const int count = slots.size(s);
      const Raw8 raw_x = load_raw8(xr, start, count);
      const Raw8 raw_dy = load_raw8(dyr, start, count);
      const Raw8 raw_g = load_raw8(gamma, start, count);
      prepare(start, count, raw_x, raw_dy, raw_g, xhat, g, accumulate);
    };

    // Pass 1: every load of the cached slots first, then the arithmetic.
    float xh[kCached][8], gg[kCached][8];
    {
      Raw8 raw_x[kCached], raw_dy[kCached], raw_g[kCached];
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t s = threadIdx.x + int64_t{k} * threads;
        const int64_t start = slots.start(s);
        const int count = slots.size(s);
        raw_x[k] = load_raw8(xr, start, count);
        raw_dy[k] = load_raw8(dyr, start, count);
        raw_g[k] = load_raw8(gamma, start, count);
      }
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t s = threadIdx.x + int64_t{k} * threads;
        prepare(slots.start(s), slots.size(s), raw_x[k], raw_dy[k], raw_g[k], xh[k], gg[k], true);
      }
    }
    for (int64_t s = uncached; s < slots.count; s += threads) {
      float xhat[8], g[8];
      load_slot(s, xhat, g, true);
    }
    block_sum(sums, scratch);
    const float mean_g = sums[0] * inv_c, mean_gx = sums[1] * inv_c;

    // Pass 2: dx.
    auto emit = [&](int64_t s, const float (&xhat)[8], const float (&g)[8]) {
      float out[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        out[e] = rms ? rs * (g[e] - xhat[e] * mean_gx) : rs * (g[e] - mean_g - xhat[e] * mean_gx);
      }
      store8(dxr, slots.start(s), slots.size(s), out);
    };
#pragma unroll
    for (int k = 0; k < kCached; ++k) emit(threadIdx.x + int64_t{k} * threads, xh[k], gg[k]);
    for (int64_t s = uncached; s < slots.count; s += threads) {
      float xhat[8], g[8];
      load_slot(s, xhat, g, false);
      emit(s, xhat, g);
    }
  }
  if (shared_partial) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < c; j += threads) {
      block_partial[j] = pg[at(j)];
      if (!rms) block_partial[c + j] = pb[at(j)];
    }
  }
}

// --- host side -----------------------------------------------------------------------------------

struct Rows {
  int64_t n = 0;
  int64_t c = 0;
};

// x viewed as [n, c] over its last dimension, with a parameter of c elements.
Rows norm_rows(const Tensor& x, const Tensor& gamma, const char* op) {
  require(x.rank() >= 1, op, "expected at least one dimension, got a scalar");
  const int64_t c = x.dim(-1);
  require(gamma.numel() == c, op,
          "gamma " + tensor::to_string(gamma.shape()) + " for rows of " +
              tensor::to_string(x.shape()));
  return {c == 0 ? 0 : x.numel() / c, c};
}

// A per-row statistic (mean, rstd) or a parameter gradient: f32 with `count` elements.
float* f32_of(const Tensor& t, int64_t count, const char* op, const char* what) {
  require_device(t, op);
  require(t.dtype() == DType::F32 && t.numel() == count, op,
          std::string(what) + " must be f32 with " + std::to_string(count) + " elements, got " +
              std::string(tensor::name(t.dtype())) + " " + tensor::to_string(t.shape()));
  return static_cast<float*>(t.raw());
}

void norm_forward(cudaStream_t stream, const char* op, const Tensor& x, const Tensor& gamma,
                  const Tensor* beta, float eps, Tensor& y, Tensor* mean, Tensor& rstd) {
  const Rows r = norm_rows(x, gamma, op);
  if (beta) {
    require(beta->numel() == r.c, op,
            "beta " + tensor::to_string(beta->shape()) + " for " + tensor::to_string(x.shape()));
  }
  require_numel(x, y, op);
  float* mean_out = mean ? f32_of(*mean, r.n, op, "mean") : nullptr;
  float* rstd_out = f32_of(rstd, r.n, op, "rstd");
  const Floats fx = floats(x, op, "x"), fy = floats(y, op, "y");
  const Floats fg = floats(gamma, op, "gamma");
  const Floats fb = beta ? floats(*beta, op, "beta") : fg;
  if (r.n == 0) return;
  const unsigned threads = threads_for(r.c, kForwardThreads);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(r.n, int64_t{1} << 20));
  norm_forward_kernel<<<blocks, threads, 0, stream>>>(fx, fg, fb, fy, mean_out, rstd_out, r.n,
                                                      r.c, eps, beta == nullptr);
  check_launch(op);
}

// The largest dynamic shared memory a block of norm_backward_kernel may ask for on this device.
size_t shared_memory_limit(const char* op) {
  int device = 0, bytes = 0;
  check_cuda(cudaGetDevice(&device), op);
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  // Leave room for the kernel's static shared memory (the reduction scratch).
  return bytes > 1024 ? static_cast<size_t>(bytes - 1024) : 0;
}

void norm_backward(cudaStream_t stream, Workspace& workspace, const char* op, const Tensor& dy,
                   const Tensor& x, const Tensor& gamma, const Tensor* mean, const Tensor& rstd,
                   Tensor& dx, Tensor& dgamma, Tensor* dbeta) {
  const Rows r = norm_rows(x, gamma, op);
  require_numel(x, dy, op);
  require_numel(x, dx, op);
  const float* mean_in = mean ? f32_of(*mean, r.n, op, "mean") : nullptr;
  const float* rstd_in = f32_of(rstd, r.n, op, "rstd");
  float* dgamma_out = f32_of(dgamma, r.c, op, "dgamma");
  float* dbeta_out = dbeta ? f32_of(*dbeta, r.c, op, "dbeta") : nullptr;
  const Floats fdy = floats(dy, op, "dy"), fx = floats(x, op, "x"), fdx = floats(dx, op, "dx");
  const Floats fg = floats(gamma, op, "gamma");
  if (r.n == 0 || r.c == 0) return;

  // Blocks of consecutive rows, a function of n and c alone (so the sums' order is too): at
  // least 4 rows a block, at most 512 blocks, and partial sums of at most ~32 MiB.
  const bool rms = dbeta == nullptr;
  const int64_t parts = rms ? 1 : 2;
  const int64_t partial_bytes = parts * r.c * int64_t{sizeof(float)};
  const int64_t wanted =
      std::min({(r.n + 3) / 4, int64_t{512}, std::max<int64_t>(1, (int64_t{32} << 20) / partial_bytes)});
  const int64_t rows_per_block = (r.n + wanted - 1) / wanted;
  const int64_t blocks = (r.n + rows_per_block - 1) / rows_per_block;
  auto* partial = static_cast<float*>(
      workspace.get(static_cast<size_t>(blocks * partial_bytes), stream));

  // The block's partial sums live in shared memory when they fit, else in `partial` itself.
  // Beyond the default 48 KiB per block (static scratch included) the kernel must opt in.
  size_t shared = static_cast<size_t>(parts * padded(r.c)) * sizeof(float);
  if (shared > 47 * 1024) {
    if (shared <= shared_memory_limit(op)) {
      check_cuda(cudaFuncSetAttribute(norm_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(shared)),
                 op);
    } else {
      shared = 0;
    }
  }
  const unsigned threads = threads_for(r.c, kBackwardThreads);
  norm_backward_kernel<<<static_cast<unsigned>(blocks), threads, shared, stream>>>(
      fdy, fx, fg, mean_in, rstd_in, fdx, partial, r.n, r.c, rows_per_block, rms, shared > 0);
  check_launch(op);
  add_partials_kernel<<<grid_for(parts * r.c), 256, 0, stream>>>(partial, blocks, parts * r.c,
                                                                 r.c, dgamma_out, dbeta_out);
  check_launch(op);
}

}  // namespace

void layer_norm_forward(cudaStream_t stream, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  norm_forward(stream, "layer_norm_forward", x, gamma, &beta, eps, y, &mean, rstd);
}

void layer_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dy,
                         const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  norm_backward(stream, workspace, "layer_norm_backward", dy, x, gamma, &mean, rstd, dx, dgamma,
                &dbeta);
}

void rms_norm_forward(cudaStream_t stream, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd) {
  norm_forward(stream, "rms_norm_forward", x, gamma, nullptr, eps, y, nullptr, rstd);
}

void rms_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dy,
                       const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                       Tensor& dgamma) {
  norm_backward(stream, workspace, "rms_norm_backward", dy, x, gamma, nullptr, rstd, dx, dgamma,
                nullptr);
}

}  // namespace megatron::kernels
