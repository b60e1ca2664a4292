// The CUDA backend's Q/K norm, matching CpuBackend::qk_norm_forward / qk_norm_backward
// (tensor/cpu_norm.cpp): RMS norm of each query and key head of fused qkv rows, a warp per head,
// statistics in f32; gamma gradients summed per block of heads, then across blocks in order.
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
// qkv, dout, dqkv and the two gammas take their dtypes independently, so (as in norm.cu) the
// dtype is a run-time value rather than a template parameter.
using namespace rows;

// Heads are cut into chunks of 8 elements from the head's first element (the last chunk possibly
// short); lane l of a warp takes chunks l, l + 32, ... of every head it works on, so a column
// always belongs to the same lane. load_raw8 / store8 use vectors where a chunk is aligned and
// single elements elsewhere (head_dim not a multiple of 8, odd offsets).
constexpr int kWarps = 8;  // per block, forward and backward
// Chunks per lane kept in registers across a head's passes (heads up to 512 wide); chunks beyond
// are read again.
constexpr int kCached = 2;
// Dynamic shared memory of a backward block: per-warp partial sums of the gammas' gradients.
constexpr int64_t kSharedBytes = 48 * 1024;

// Where the heads sit in a qkv row: per group, per_group query heads, the key head, the value
// head (AttentionShape's layout), each dim wide; `normed` of them (queries and keys) have an rstd.
struct Layout {
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t per_group = 0;
  int64_t slots = 0;   // heads + 2 * groups
  int64_t normed = 0;  // heads + groups
};

// Elements of chunk s of a head of c.
__device__ __forceinline__ int chunk_size(int64_t s, int64_t c) {
  const int64_t left = c - s * 8;
  return left <= 0 ? 0 : (left < 8 ? static_cast<int>(left) : 8);
}

// The sum of v over the warp, the same in every lane and on every run (a butterfly).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// Floats of a head's column sums in shared memory, one padding word per 8 columns: a lane adds
// 8 consecutive columns, which a plain layout would put 8 lanes to a bank.
__host__ __device__ constexpr int64_t padded(int64_t c) { return c + (c >> 3) + 1; }

// --- forward -------------------------------------------------------------------------------------

// Warp w of the grid takes heads i = w, w + warps, ... (i = row * slots + slot): value heads are
// copied; query and key heads get rstd = 1 / sqrt(sum x^2 / dim + eps) and y = x rstd gamma, as
// the CPU forms them.
__global__ void __launch_bounds__(kWarps * 32)
    qk_norm_forward_kernel(Floats x, Floats q_gamma, Floats k_gamma, Floats y, float* rstd,
                           Layout h, float eps) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x >> 5);
  const int64_t n = h.rows * h.slots;
  const int64_t c = h.dim;
  const int64_t chunks = (c + 7) / 8;
  const float width = static_cast<float>(c);
  const int64_t uncached = lane + int64_t{kCached} * 32;
  for (int64_t i = int64_t{blockIdx.x} * (blockDim.x >> 5) + (threadIdx.x >> 5); i < n;
       i += warps) {
    const int64_t row = i / h.slots, slot = i - row * h.slots;
    const int64_t place = slot % (h.per_group + 2);  // per_group: key; per_group + 1: value
    const Floats xr = x.at(i * c), yr = y.at(i * c);
    if (place == h.per_group + 1) {
      for (int64_t s = lane; s < chunks; s += 32) {
        float v[8];
        load8(xr, s * 8, chunk_size(s, c), v);
        store8(yr, s * 8, chunk_size(s, c), v);
      }
      continue;
    }

    // Pass 1: sum x^2 (elements past a chunk's end, and chunks past the head's, are zero).
    float v[kCached][8];
    {
      Raw8 raw[kCached];
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t s = lane + int64_t{k} * 32;
        raw[k] = load_raw8(xr, s * 8, chunk_size(s, c));
      }
#pragma unroll
      for (int k = 0; k < kCached; ++k) to_floats(raw[k], xr.kind, v[k]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sum += v[k][e] * v[k][e];
    }
    for (int64_t s = uncached; s < chunks; s += 32) {
      float u[8];
      load8(xr, s * 8, chunk_size(s, c), u);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum += u[e] * u[e];
    }
    sum = warp_sum(sum);
    const float rs = 1.0f / sqrtf(sum / width + eps);

    // Pass 2: the output, chunk by chunk.
    const Floats gamma = place == h.per_group ? k_gamma : q_gamma;
    auto emit = [&](int64_t s, const float (&xs)[8]) {
      const int count = chunk_size(s, c);
      float g[8], out[8];
      load8(gamma, s * 8, count, g);
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = xs[e] * rs * g[e];
      store8(yr, s * 8, count, out);
    };
#pragma unroll
    for (int k = 0; k < kCached; ++k) emit(lane + int64_t{k} * 32, v[k]);
    for (int64_t s = uncached; s < chunks; s += 32) {
      float u[8];
      load8(xr, s * 8, chunk_size(s, c), u);
      emit(s, u);
    }
    if (lane == 0) rstd[row * h.normed + slot - slot / (h.per_group + 2)] = rs;
  }
}

// --- backward ------------------------------------------------------------------------------------

// Block b takes heads [b * heads_per_block, ...) (i = row * slots + slot); its warp w takes the
// range's heads w, w + warps, ... in order. Per query or key head (as the CPU):
//   xhat = x rstd, g = dy gamma, dx = rstd (g - xhat mean(g xhat)),
// and dy xhat joins the warp's own partial sums (query heads' in the first half, key heads' in
// the second), column by column in head order; value heads copy dy. Each column of a warp's sums
// belongs to one lane, so no two threads ever touch one word. The block then adds its warps'
// sums in warp order into partial[b * 2 * dim, ...) for add_partials_kernel.
// shared_partial: the warps' sums sit in shared memory (2 * padded(dim) floats a warp, column j
// at j + j / 8); else the block has a single warp, whose sums are its slice of `partial` itself.
__global__ void __launch_bounds__(kWarps * 32)
    qk_norm_backward_kernel(Floats dy, Floats x, Floats q_gamma, Floats k_gamma,
                            const float* rstd, Floats dx, float* partial, Layout h,
                            int64_t heads_per_block, bool shared_partial) {
  extern __shared__ float shared_sums[];
  const int64_t c = h.dim;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  float* block_partial = partial + int64_t{blockIdx.x} * 2 * c;
  const int64_t stride = shared_partial ? padded(c) : c;
  float* sums = shared_partial ? shared_sums + int64_t{warp} * 2 * stride : block_partial;
  auto at = [shared_partial](int64_t j) { return shared_partial ? j + (j >> 3) : j; };
  const int64_t zeros = shared_partial ? int64_t{warps} * 2 * stride : 2 * c;
  float* zero_base = shared_partial ? shared_sums : block_partial;
  for (int64_t j = threadIdx.x; j < zeros; j += blockDim.x) zero_base[j] = 0.0f;
  __syncthreads();

  const int64_t n = h.rows * h.slots;
  const int64_t chunks = (c + 7) / 8;
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t uncached = lane + int64_t{kCached} * 32;
  const int64_t first = int64_t{blockIdx.x} * heads_per_block;
  const int64_t end = min(n, first + heads_per_block);
  for (int64_t i = first + warp; i < end; i += warps) {
    const int64_t row = i / h.slots, slot = i - row * h.slots;
    const int64_t place = slot % (h.per_group + 2);  // per_group: key; per_group + 1: value
    const Floats dyr = dy.at(i * c), dxr = dx.at(i * c);
    if (place == h.per_group + 1) {
      for (int64_t s = lane; s < chunks; s += 32) {
        float v[8];
        load8(dyr, s * 8, chunk_size(s, c), v);
        store8(dxr, s * 8, chunk_size(s, c), v);
      }
      continue;
    }
    const bool key = place == h.per_group;
    const Floats xr = x.at(i * c);
    const Floats gamma = key ? k_gamma : q_gamma;
    float* pg = sums + (key ? stride : 0);
    const float rs = rstd[row * h.normed + slot - slot / (h.per_group + 2)];

    // xhat and g of one chunk; with `accumulate`, its dy xhat joins the warp's sums and its
    // g xhat the head's dot (zero past the chunk's end: dy and gamma are).
    float dot = 0.0f;
    auto prepare = [&](int64_t s, const Raw8& raw_x, const Raw8& raw_dy, const Raw8& raw_g,
                       float (&xhat)[8], float (&g)[8], bool accumulate) {
      const int count = chunk_size(s, c);
      float xs[8], d[8], gm[8];
      to_floats(raw_x, x.kind, xs);
      to_floats(raw_dy, dy.kind, d);
      to_floats(raw_g, gamma.kind, gm);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xhat[e] = xs[e] * rs;
        g[e] = d[e] * gm[e];
      }
      if (accumulate) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (e < count) pg[at(s * 8 + e)] += d[e] * xhat[e];
          dot += g[e] * xhat[e];
        }
      }
    };
    auto load_chunk = [&](int64_t s, float (&xhat)[8], float (&g)[8], bool accumulate) {
      const int count = chunk_size(s, c);
      const Raw8 raw_x = load_raw8(xr, s * 8, count);
      const Raw8 raw_dy = load_raw8(dyr, s * 8, count);
      const Raw8 raw_g = load_raw8(gamma, s * 8, count);
      prepare(s, raw_x, raw_dy, raw_g, xhat, g, accumulate);
    };

    // Pass 1: every load of the cached chunks first, then the arithmetic.
    float xh[kCached][8], gg[kCached][8];
    {
      Raw8 raw_x[kCached], raw_dy[kCached], raw_g[kCached];
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t s = lane + int64_t{k} * 32;
        const int count = chunk_size(s, c);
        raw_x[k] = load_raw8(xr, s * 8, count);
        raw_dy[k] = load_raw8(dyr, s * 8, count);
        raw_g[k] = load_raw8(gamma, s * 8, count);
      }
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        prepare(lane + int64_t{k} * 32, raw_x[k], raw_dy[k], raw_g[k], xh[k], gg[k], true);
      }
    }
    for (int64_t s = uncached; s < chunks; s += 32) {
      float xhat[8], g[8];
      load_chunk(s, xhat, g, true);
    }
    const float mean_gx = warp_sum(dot) * inv_c;

    // Pass 2: dx.
    auto emit = [&](int64_t s, const float (&xhat)[8], const float (&g)[8]) {
      float out[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = rs * (g[e] - xhat[e] * mean_gx);
      store8(dxr, s * 8, chunk_size(s, c), out);
    };
#pragma unroll
    for (int k = 0; k < kCached; ++k) emit(lane + int64_t{k} * 32, xh[k], gg[k]);
    for (int64_t s = uncached; s < chunks; s += 32) {
      float xhat[8], g[8];
      load_chunk(s, xhat, g, false);
      emit(s, xhat, g);
    }
  }
  if (shared_partial) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float q = shared_sums[at(j)], k = shared_sums[stride + at(j)];
      for (int w = 1; w < warps; ++w) {
        q += shared_sums[int64_t{w} * 2 * stride + at(j)];
        k += shared_sums[int64_t{w} * 2 * stride + stride + at(j)];
      }
      block_partial[j] = q;
      block_partial[c + j] = k;
    }
  }
}

// --- host side -----------------------------------------------------------------------------------

// The heads of qkv, checked as the CPU checks them.
Layout qk_layout(const Tensor& qkv, const AttentionShape& shape, const Tensor& q_gamma,
                 const Tensor& k_gamma, const char* op) {
  require(shape.head_dim > 0 && shape.groups > 0 && shape.heads > 0 &&
              shape.heads % shape.groups == 0,
          op, "bad shape (heads must be a positive multiple of groups)");
  const int64_t width = shape.qkv_width();
  require(qkv.numel() % width == 0, op,
          "qkv " + tensor::to_string(qkv.shape()) + " is not rows of " + std::to_string(width));
  require(q_gamma.numel() == shape.head_dim && k_gamma.numel() == shape.head_dim, op,
          "q_gamma " + tensor::to_string(q_gamma.shape()) + " and k_gamma " +
              tensor::to_string(k_gamma.shape()) + " for heads of " +
              std::to_string(shape.head_dim));
  return {.rows = qkv.numel() / width,
          .dim = shape.head_dim,
          .per_group = shape.heads / shape.groups,
          .slots = shape.heads + 2 * shape.groups,
          .normed = shape.heads + shape.groups};
}

// An rstd or a gamma's gradient: f32 with `count` elements.
float* f32_of(const Tensor& t, int64_t count, const char* op, const char* what) {
  require_device(t, op);
  require(t.dtype() == DType::F32 && t.numel() == count, op,
          std::string(what) + " must be f32 with " + std::to_string(count) + " elements, got " +
              std::string(tensor::name(t.dtype())) + " " + tensor::to_string(t.shape()));
  return static_cast<float*>(t.raw());
}

}  // namespace

void qk_norm_forward(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                     const Tensor& q_gamma, const Tensor& k_gamma, float eps, Tensor& out,
                     Tensor& rstd) {
  const char* op = "qk_norm_forward";
  const Layout h = qk_layout(qkv, shape, q_gamma, k_gamma, op);
  require_numel(qkv, out, op);
  float* rstd_out = f32_of(rstd, h.rows * h.normed, op, "rstd");
  const Floats fx = floats(qkv, op, "qkv"), fy = floats(out, op, "out");
  const Floats fq = floats(q_gamma, op, "q_gamma"), fk = floats(k_gamma, op, "k_gamma");
  if (h.rows == 0) return;
  const int64_t heads = h.rows * h.slots;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((heads + kWarps - 1) / kWarps, int64_t{1} << 20));
  qk_norm_forward_kernel<<<blocks, kWarps * 32, 0, stream>>>(fx, fq, fk, fy, rstd_out, h, eps);
  check_launch(op);
}

void qk_norm_backward(cudaStream_t stream, Workspace& workspace, const Tensor& dout,
                      const Tensor& qkv, const AttentionShape& shape, const Tensor& q_gamma,
                      const Tensor& k_gamma, const Tensor& rstd, Tensor& dqkv, Tensor& dq_gamma,
                      Tensor& dk_gamma) {
  const char* op = "qk_norm_backward";
  const Layout h = qk_layout(qkv, shape, q_gamma, k_gamma, op);
  require_numel(qkv, dout, op);
  require_numel(qkv, dqkv, op);
  const int64_t c = h.dim;
  const float* rstd_in = f32_of(rstd, h.rows * h.normed, op, "rstd");
  float* dq_out = f32_of(dq_gamma, c, op, "dq_gamma");
  float* dk_out = f32_of(dk_gamma, c, op, "dk_gamma");
  const Floats fdy = floats(dout, op, "dout"), fx = floats(qkv, op, "qkv");
  const Floats fdx = floats(dqkv, op, "dqkv");
  const Floats fq = floats(q_gamma, op, "q_gamma"), fk = floats(k_gamma, op, "k_gamma");
  if (h.rows == 0) return;

  // Warps a block, and where their sums live: in shared memory when at least one warp's fit in
  // the default 48 KiB, else (heads over ~5400 wide) one warp a block summing into global memory.
  const int64_t per_warp_bytes = 2 * padded(c) * int64_t{sizeof(float)};
  const bool shared_partial = per_warp_bytes <= kSharedBytes;
  const int64_t warps =
      shared_partial ? std::min<int64_t>(kWarps, kSharedBytes / per_warp_bytes) : 1;
  const size_t shared = shared_partial ? static_cast<size_t>(warps * per_warp_bytes) : 0;

  // Blocks of consecutive heads, a function of the shapes alone (so the sums' order is too): at
  // least 4 heads a warp, at most 1024 blocks, and partial sums of at most ~32 MiB.
  const int64_t heads = h.rows * h.slots;
  const int64_t partial_bytes = 2 * c * int64_t{sizeof(float)};
  const int64_t wanted =
      std::min({(heads + 4 * warps - 1) / (4 * warps), int64_t{1024},
                std::max<int64_t>(1, (int64_t{32} << 20) / partial_bytes)});
  const int64_t heads_per_block = (heads + wanted - 1) / wanted;
  const int64_t blocks = (heads + heads_per_block - 1) / heads_per_block;
  auto* partial = static_cast<float*>(
      workspace.get(static_cast<size_t>(blocks * partial_bytes), stream));

  qk_norm_backward_kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(warps * 32),
                            shared, stream>>>(fdy, fx, fq, fk, rstd_in, fdx, partial, h,
                                              heads_per_block, shared_partial);
  check_launch(op);
  add_partials_kernel<<<grid_for(2 * c), 256, 0, stream>>>(partial, blocks, 2 * c, c, dq_out,
                                                           dk_out);
  check_launch(op);
}

}  // namespace megatron::kernels
