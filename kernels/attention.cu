// Flash attention for the CUDA backend (FlashAttention-2 scheme): the forward pass runs an online
// softmax over key blocks and saves the log-sum-exp; the backward pass recomputes the
// probabilities from it. No seq x seq matrix ever reaches global memory, and no float atomics
// are used anywhere: every result is the same bit for bit from run to run.
//
// Matches CpuBackend (src/tensor/cpu_attention.cpp) op for op: the fused QKV layout, lse of the
// undropped probabilities, dropout index ((b * total_heads + head_offset + h) * seq + i) * seq + j
// (RngKey::offset unused, as on the CPU), and the backward's delta_i = rowsum(dO_i * O_i).
//
// Design: SIMT, f32 math on f32 shared-memory tiles.
// - Tiles of 64 query rows and 64 key rows; 256 threads as a 16 x 16 grid. Thread (ty, tx) owns
//   rows ty + 16 i and score columns tx + 16 j (i, j < 4) of a 64 x 64 score tile, and columns
//   tx + 16 k (k < head_dim / 16) of the 64 x head_dim accumulator of those rows. The 16 threads
//   of a row are one half-warp: row max and sum are shuffles over 16 lanes.
// - Tiles are f32 in shared memory, rows padded by 4 floats (conflict-free float4 reads); global
//   loads and stores move 16 bytes at a time whenever the pointers allow (scalar otherwise), and
//   convert from and to the tensor's dtype, which is a runtime argument (it only touches the
//   tile loads and stores), so the kernels are templated on head_dim alone.
// - The two tile products (product_abt: S = A B^T over head_dim; product_sb: acc += S B over 64
//   keys) and the thread-to-element map above are the whole of the arithmetic: a tensor-core
//   version replaces those two functions and the map (mma fragments instead of 4 x 4 blocks),
//   keeping the loads, masking, softmax and kernel structure.
// - Forward: one CTA per (query block, head, batch); causal CTAs stop at the diagonal block.
// - Backward: delta kernel (a warp per row and head, into the workspace), then a dK/dV kernel (a
//   CTA per key block of a KV group, looping over the group's query heads and their query
//   blocks, so GQA sums in a fixed order; with few CTAs the heads are split over several and
//   their f32 partial sums added in a fixed order by a small kernel), then a dQ kernel (a CTA
//   per query block of a head, looping over key blocks and recomputing P and dP).
// - Shared memory at head_dim 128: forward 99 KiB, dQ 152 KiB, dK/dV 152.5 KiB (within the A100's
//   163 KiB); registers are capped at 128 where shared memory leaves room for two CTAs an SM.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/device_key_lengths.cuh"
#include "kernels/ops.hpp"
#include "tensor/random.hpp"

// Dynamic shared memory of every kernel in this file.
extern __shared__ __align__(16) float attention_smem[];

namespace megatron::kernels {
namespace {

using tensor::DType;

constexpr int kBlock = 64;                 // query rows and key rows per tile
constexpr int kGrid = 16;                  // threads along each side of a score tile
constexpr int kThreads = kGrid * kGrid;    // 256
constexpr int kPer = kBlock / kGrid;       // rows and score columns per thread: 4
constexpr int kScoreStride = kBlock + 16;  // floats per score-tile row: half-warps hit all banks
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// A [64, D] tile in shared memory, f32, rows padded to D + 4 floats: 16-byte aligned rows whose
// float4 reads by 8 consecutive rows fall in distinct banks.
template <int D>
struct Tile {
  static constexpr int stride = D + 4;
  static constexpr int floats = kBlock * stride;
  static constexpr int cols = D / kGrid;  // accumulator columns per thread
};

// The forward's probability tile takes the place of K once the scores are formed, where it fits
// (head_dim >= 76): one more barrier a key block, 20 KiB less shared memory, which at head_dim
// 128 lets two CTAs share an H100 SM and at 80 and 96 two share an A100 SM.
constexpr bool scores_over_keys(int dim) { return dim + 4 >= kScoreStride; }
constexpr size_t forward_smem(int dim) {
  return sizeof(float) *
         (3 * kBlock * (dim + 4) + (scores_over_keys(dim) ? 0 : kBlock * kScoreStride));
}
constexpr size_t dq_smem(int dim) {
  return sizeof(float) * (4 * kBlock * (dim + 4) + kBlock * kScoreStride);
}
constexpr size_t dkdv_smem(int dim) {
  return sizeof(float) * (4 * kBlock * (dim + 4) + kBlock * kScoreStride + 2 * kBlock);
}

// CTAs per SM that the register budget (__launch_bounds__) leaves room for: two where shared
// memory allows two on an H100 (228 KiB per SM, 1 KiB of it reserved per CTA), one otherwise
// (registers then uncapped up to 255).
constexpr int ctas_for(size_t smem) { return 2 * (smem + 1024) <= 228 * 1024 ? 2 : 1; }
constexpr int forward_ctas(int dim) { return ctas_for(forward_smem(dim)); }
constexpr int backward_ctas(int dim) { return ctas_for(dkdv_smem(dim)); }  // dkdv_smem >= dq_smem

// What every attention kernel needs to find its heads and mask its scores.
struct Common {
  const void* qkv;
  int64_t width;      // elements per qkv row
  int64_t out_width;  // heads * head_dim
  int seq;
  int blocks;  // ceil(seq / 64)
  int heads;
  int per_group;     // query heads per key/value group
  float scale;       // of the scores q.k
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
  float dropout;     // 0: off
  float keep_scale;  // 1 / (1 - dropout)
  tensor::RngKey rng;
  const int* key_lengths;  // [batch] on the device: the padding mask's keys per sequence; null: all
  // [batch * seq] on the device: the first key each query row attends to (packed documents,
  // AttentionOptions::first_keys); null: key 0.
  const int* first_keys;
  int64_t total_heads;  // of the dropout numbering (shape.heads when options.total_heads is 0)
  int64_t head_offset;
  DType qkv_dtype;
  bool causal;
  bool vec;  // every base pointer 16-byte aligned (row strides always are)
};

struct ForwardParams {
  Common c;
  void* out;
  float* lse;
  DType out_dtype;
};

struct BackwardParams {
  Common c;
  const void* dout;
  const float* lse;
  const float* delta;
  void* dqkv;
  // chunks > 1: the dK/dV CTAs of a group split its query heads into `chunks` ranges and write
  // f32 partial sums to partial [batch, groups, chunks, seq, 2 * head_dim] (dK then dV), which
  // attention_dkdv_reduce_kernel adds up in chunk order.
  float* partial;
  int chunks;
  DType dout_dtype;
  DType dqkv_dtype;
};

// Below this many dK/dV CTAs (about two waves of one CTA per SM on an A100 or H100) the group's
// query heads are split over several CTAs. A function of the shape alone, so that the summation
// order, and so the bits, never depend on the device.
constexpr int64_t kSplitBelow = 256;

__device__ __forceinline__ int min_int(int a, int b) { return a < b ? a : b; }

// Columns of a fused qkv row: group g holds its query heads, then its key head, then its value.
__device__ __forceinline__ int64_t query_column(const Common& c, int h, int dim) {
  return (int64_t(h / c.per_group) * (c.per_group + 2) + h % c.per_group) * dim;
}
__device__ __forceinline__ int64_t key_column(const Common& c, int g, int dim) {
  return (int64_t(g) * (c.per_group + 2) + c.per_group) * dim;
}

// Where head h of batch b starts in the dropout numbering of the probabilities.
// Keys sequence b attends to: 0..keys-1 (the padding mask), every key without one.
__device__ __forceinline__ int keys_of(const Common& c, int b) {
  return c.key_lengths ? c.key_lengths[b] : c.seq;
}

// Whether query qi of sequence b sees key kj: inside the sequence, its keys and its document,
// and not after the query when causal.
__device__ __forceinline__ bool visible(const Common& c, int b, int qi, int kj, int keys) {
  return qi < c.seq && kj < keys && (!c.causal || kj <= qi) &&
         (!c.first_keys || kj >= c.first_keys[int64_t(b) * c.seq + qi]);
}

__device__ __forceinline__ uint64_t head_base(const Common& c, int b, int h) {
  return static_cast<uint64_t>((int64_t(b) * c.total_heads + c.head_offset + h) * int64_t(c.seq) *
                               int64_t(c.seq));
}

// The dropout multiplier of probability (i, j) of a head: keep_scale or 0.
__device__ __forceinline__ float dropout_factor(const Common& c, uint64_t base, int i, int j) {
  const uint64_t index = base + static_cast<uint64_t>(int64_t(i) * c.seq + j);
  return tensor::uniform_at(c.rng, index) >= c.dropout ? c.keep_scale : 0.0f;
}

// s_tile[r][col] = the dropout multiplier of probability (i0 + r, j0 + col) for this thread's 4 x 4
// elements, transposed (rows are keys) when `keys_are_rows`. One element at a time: the Philox
// rounds then occupy a few registers instead of sixteen interleaved copies.
__device__ __forceinline__ void dropout_tile(const Common& c, uint64_t base, int i0, int j0,
                                             bool keys_are_rows, float* s_tile, int tx, int ty) {
#pragma unroll 1
  for (int e = 0; e < kPer * kPer; ++e) {
    const int r = ty + kGrid * (e / kPer), col = tx + kGrid * (e % kPer);
    const int qi = i0 + (keys_are_rows ? col : r), kj = j0 + (keys_are_rows ? r : col);
    s_tile[r * kScoreStride + col] = dropout_factor(c, base, qi, kj);
  }
}

// Over the 16 lanes of a half-warp (the threads of one row), in a fixed order.
__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
  for (int m = kGrid / 2; m >= 1; m /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
  for (int m = kGrid / 2; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// --- 16-byte conversions between storage and f32 ---------------------------------------------

template <typename T>
__device__ __forceinline__ void unpack16(const uint4& raw, float* dst) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(&raw);
  } else {
    float v[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 f;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        f = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(&raw)[k]);
      } else {
        f = __half22float2(reinterpret_cast<const __half2*>(&raw)[k]);
      }
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
    *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// Round to nearest even, as store() and the CPU's to_bf16 / to_f16 do.
template <typename T>
__device__ __forceinline__ uint4 pack16(const float* src) {
  uint4 raw;
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(&raw) = *reinterpret_cast<const float4*>(src);
  } else {
    const float4 a = *reinterpret_cast<const float4*>(src);
    const float4 b = *reinterpret_cast<const float4*>(src + 4);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
      h[0] = __floats2bfloat162_rn(a.x, a.y);
      h[1] = __floats2bfloat162_rn(a.z, a.w);
      h[2] = __floats2bfloat162_rn(b.x, b.y);
      h[3] = __floats2bfloat162_rn(b.z, b.w);
    } else {
      __half2* h = reinterpret_cast<__half2*>(&raw);
      h[0] = __floats2half2_rn(a.x, a.y);
      h[1] = __floats2half2_rn(a.z, a.w);
      h[2] = __floats2half2_rn(b.x, b.y);
      h[3] = __floats2half2_rn(b.z, b.w);
    }
  }
  return raw;
}

// --- tiles between global and shared memory ----------------------------------------------------

// The element-by-element paths for pointers that are not 16-byte aligned (views at odd offsets):
// rare, so called rather than inlined into every tile load (nvcc time and code size).
template <int D, typename T>
__device__ __noinline__ void load_tile_scalar(float* dst, const T* src, int64_t ld, int rows) {
  for (int e = int(threadIdx.x); e < kBlock * D; e += kThreads) {
    const int r = e / D, d = e % D;
    dst[r * Tile<D>::stride + d] = r < rows ? load(src, r * ld + d) : 0.0f;
  }
}

template <int D, typename T>
__device__ __noinline__ void store_tile_scalar(T* dst, int64_t ld, const float* src, int rows) {
  for (int e = int(threadIdx.x); e < rows * D; e += kThreads) {
    const int r = e / D, d = e % D;
    store(dst, r * ld + d, src[r * Tile<D>::stride + d]);
  }
}

// dst[r * stride + d] = src[r * ld + d] as f32 for r < rows, d < D; rows rows..63 are zero.
template <int D, typename T>
__device__ __forceinline__ void load_tile_as(float* dst, const T* src, int64_t ld, int rows,
                                             bool vec) {
  constexpr int stride = Tile<D>::stride;
  if (vec) {
    constexpr int kVec = 16 / int(sizeof(T));  // elements per 16 bytes
    constexpr int kChunks = D / kVec;          // per row
    constexpr int kTotal = kBlock * kChunks;
    constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
    // All of a thread's loads are issued before any conversion.
    uint4 raw[kIters];
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int c = it * kThreads + int(threadIdx.x);
      const int r = c / kChunks, k = c % kChunks;
      raw[it] = make_uint4(0u, 0u, 0u, 0u);
      if ((kTotal % kThreads == 0 || c < kTotal) && r < rows) {
        raw[it] = *reinterpret_cast<const uint4*>(src + r * ld + k * kVec);
      }
    }
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int c = it * kThreads + int(threadIdx.x);
      if (kTotal % kThreads == 0 || c < kTotal) {
        unpack16<T>(raw[it], dst + (c / kChunks) * stride + (c % kChunks) * kVec);
      }
    }
  } else {
    load_tile_scalar<D>(dst, src, ld, rows);
  }
}

template <int D>
__device__ __forceinline__ void load_tile(float* dst, const void* base, DType dtype, int64_t offset,
                                          int64_t ld, int rows, bool vec) {
  switch (dtype) {
    case DType::Bf16:
      load_tile_as<D>(dst, static_cast<const __nv_bfloat16*>(base) + offset, ld, rows, vec);
      break;
    case DType::F16:
      load_tile_as<D>(dst, static_cast<const __half*>(base) + offset, ld, rows, vec);
      break;
    default:
      load_tile_as<D>(dst, static_cast<const float*>(base) + offset, ld, rows, vec);
      break;
  }
}

// dst[r * ld + d] = src[r * stride + d] in T for r < rows, d < D.
template <int D, typename T>
__device__ __forceinline__ void store_tile_as(T* dst, int64_t ld, const float* src, int rows,
                                              bool vec) {
  constexpr int stride = Tile<D>::stride;
  if (vec) {
    constexpr int kVec = 16 / int(sizeof(T));
    constexpr int kChunks = D / kVec;
    for (int c = int(threadIdx.x); c < rows * kChunks; c += kThreads) {
      const int r = c / kChunks, k = c % kChunks;
      *reinterpret_cast<uint4*>(dst + r * ld + k * kVec) = pack16<T>(src + r * stride + k * kVec);
    }
  } else {
    store_tile_scalar<D>(dst, ld, src, rows);
  }
}

template <int D>
__device__ __forceinline__ void store_tile(void* base, DType dtype, int64_t offset, int64_t ld,
                                           const float* src, int rows, bool vec) {
  switch (dtype) {
    case DType::Bf16:
      store_tile_as<D>(static_cast<__nv_bfloat16*>(base) + offset, ld, src, rows, vec);
      break;
    case DType::F16:
      store_tile_as<D>(static_cast<__half*>(base) + offset, ld, src, rows, vec);
      break;
    default:
      store_tile_as<D>(static_cast<float*>(base) + offset, ld, src, rows, vec);
      break;
  }
}

// --- the two tile products (the part a tensor-core version replaces) ---------------------------

// acc[i][j] = sum_d a[ty + 16 i][d] * b[tx + 16 j][d]: this thread's 4 x 4 of A B^T for two
// [64, D] tiles.
template <int D>
__device__ __forceinline__ void product_abt(const float* a, const float* b, int tx, int ty,
                                            float (&acc)[kPer][kPer]) {
  constexpr int stride = Tile<D>::stride;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[i][j] = 0.0f;
#pragma unroll 2
  for (int d = 0; d < D; d += 4) {
    float4 av[kPer], bv[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      av[i] = *reinterpret_cast<const float4*>(a + (ty + kGrid * i) * stride + d);
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      bv[j] = *reinterpret_cast<const float4*>(b + (tx + kGrid * j) * stride + d);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        float s = acc[i][j];
        s = fmaf(av[i].x, bv[j].x, s);
        s = fmaf(av[i].y, bv[j].y, s);
        s = fmaf(av[i].z, bv[j].z, s);
        s = fmaf(av[i].w, bv[j].w, s);
        acc[i][j] = s;
      }
  }
}

// acc[i][k] += sum_j s[ty + 16 i][j] * b[j][tx + 16 k]: this thread's rows of a [64, 64] score
// tile (stride kScoreStride) times a [64, D] tile.
template <int D>
__device__ __forceinline__ void product_sb(const float* s, const float* b, int tx, int ty,
                                           float (&acc)[kPer][Tile<D>::cols]) {
  constexpr int stride = Tile<D>::stride, cols = Tile<D>::cols;
#pragma unroll 2
  for (int j = 0; j < kBlock; j += 4) {
    float sv[kPer][4];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const float4 v = *reinterpret_cast<const float4*>(s + (ty + kGrid * i) * kScoreStride + j);
      sv[i][0] = v.x;
      sv[i][1] = v.y;
      sv[i][2] = v.z;
      sv[i][3] = v.w;
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      float bv[cols];
#pragma unroll
      for (int k = 0; k < cols; ++k) bv[k] = b[(j + jj) * stride + tx + kGrid * k];
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int k = 0; k < cols; ++k) acc[i][k] = fmaf(sv[i][jj], bv[k], acc[i][k]);
    }
  }
}

// This thread's accumulator (times row_factor[i]) into a [64, D] tile, for a vector store.
template <int D>
__device__ __forceinline__ void stage(float* dst, const float (&acc)[kPer][Tile<D>::cols],
                                      const float (&row_factor)[kPer], int tx, int ty) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int k = 0; k < Tile<D>::cols; ++k) {
      dst[(ty + kGrid * i) * Tile<D>::stride + tx + kGrid * k] = acc[i][k] * row_factor[i];
    }
}

// --- kernels ----------------------------------------------------------------------------------

// out = softmax(scale q k^T) v per head, lse saved. Grid (query blocks, heads, batch); the
// longest causal blocks (the last) are launched first.
template <int D>
__global__ void __launch_bounds__(kThreads, forward_ctas(D))
    attention_forward_kernel(const ForwardParams p) {
  constexpr int cols = Tile<D>::cols;
  const Common& c = p.c;
  float* q_s = attention_smem;
  float* k_s = q_s + Tile<D>::floats;
  float* v_s = k_s + Tile<D>::floats;
  // [64, kScoreStride]: probabilities.
  float* s_s = scores_over_keys(D) ? k_s : v_s + Tile<D>::floats;
  const int tx = int(threadIdx.x) % kGrid, ty = int(threadIdx.x) / kGrid;
  const int qb = c.blocks - 1 - int(blockIdx.x);
  const int h = int(blockIdx.y), b = int(blockIdx.z);
  const int i0 = qb * kBlock;
  const int q_rows = min_int(kBlock, c.seq - i0);
  const int64_t row0 = int64_t(b) * c.seq;
  const int64_t k_col = key_column(c, h / c.per_group, D);
  const uint64_t base = head_base(c, b, h);

  load_tile<D>(q_s, c.qkv, c.qkv_dtype, (row0 + i0) * c.width + query_column(c, h, D), c.width,
               q_rows, c.vec);
  // Running max (base-2 scaled scores) and sum of the undropped probabilities of each row.
  float m[kPer], l[kPer], acc[kPer][cols];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int k = 0; k < cols; ++k) acc[i][k] = 0.0f;
  }

  // Causal: key blocks past the diagonal one are fully masked (query and key tiles are equal);
  // so are those past the sequence's keys.
  const int keys = keys_of(c, b);
  const int kb_end = min_int(c.causal ? qb + 1 : c.blocks, (keys + kBlock - 1) / kBlock);
  for (int kb = 0; kb < kb_end; ++kb) {
    const int j0 = kb * kBlock;
    const int k_rows = min_int(kBlock, c.seq - j0);
    __syncthreads();  // the previous block's k_s, v_s, s_s are no longer read
    load_tile<D>(k_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col, c.width, k_rows, c.vec);
    load_tile<D>(v_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col + D, c.width, k_rows,
                 c.vec);
    __syncthreads();

    float s[kPer][kPer];
    product_abt<D>(q_s, k_s, tx, ty, s);
    if constexpr (scores_over_keys(D)) __syncthreads();  // k_s is read: s_s may overwrite it
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int qi = i0 + ty + kGrid * i;
      float block_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int kj = j0 + tx + kGrid * j;
        const bool valid = visible(c, b, qi, kj, keys);
        s[i][j] = valid ? s[i][j] * c.scale_log2 : -INFINITY;
        block_max = fmaxf(block_max, s[i][j]);
      }
      const float m_new = fmaxf(m[i], half_warp_max(block_max));
      // A row with nothing valid yet keeps m = -inf: subtract 0 so that exp2 gives 0, not NaN.
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m[i] - m_use);  // 0 on the row's first valid block
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        s[i][j] = exp2f(s[i][j] - m_use);
        sum += s[i][j];
      }
      // The normaliser is of the undropped probabilities (cpu_attention.cpp, forward_head).
      l[i] = l[i] * alpha + half_warp_sum(sum);
      m[i] = m_new;
#pragma unroll
      for (int k = 0; k < cols; ++k) acc[i][k] *= alpha;
    }
    // Dropout scales what multiplies V, not the normaliser. Each thread reads back only the
    // elements it wrote, so no barrier is needed between the two passes.
    if (c.dropout > 0.0f) dropout_tile(c, base, i0, j0, false, s_s, tx, ty);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        float* at = s_s + (ty + kGrid * i) * kScoreStride + tx + kGrid * j;
        *at = c.dropout > 0.0f ? s[i][j] * *at : s[i][j];
      }
    __syncthreads();
    product_sb<D>(s_s, v_s, tx, ty, acc);
  }

  float inv[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    inv[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    const int qi = i0 + ty + kGrid * i;
    if (tx == 0 && qi < c.seq) {
      p.lse[(int64_t(b) * c.heads + h) * c.seq + qi] = (m[i] + log2f(l[i])) * kLn2;
    }
  }
  __syncthreads();  // q_s is free: stage the output there
  stage<D>(q_s, acc, inv, tx, ty);
  __syncthreads();
  store_tile<D>(p.out, p.out_dtype, (row0 + i0) * c.out_width + int64_t(h) * D, c.out_width, q_s,
                q_rows, c.vec);
}

__device__ __forceinline__ float load_as(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::Bf16:
      return load(static_cast<const __nv_bfloat16*>(p), i);
    case DType::F16:
      return load(static_cast<const __half*>(p), i);
    default:
      return load(static_cast<const float*>(p), i);
  }
}

// delta[b, h, t] = sum_d dout[b * seq + t, h * dim + d] * out[...]: a warp per (row, head), the
// lanes' partial sums combined in a fixed order.
__global__ void __launch_bounds__(kThreads)
    attention_delta_kernel(const void* out, DType out_dtype, const void* dout, DType dout_dtype,
                           float* delta, int64_t rows, int seq, int heads, int dim) {
  constexpr int kWarps = kThreads / 32;
  const int lane = int(threadIdx.x) % 32;
  const int64_t units = rows * heads;
  const int64_t stride = int64_t(gridDim.x) * kWarps;
  for (int64_t w = int64_t(blockIdx.x) * kWarps + int64_t(threadIdx.x) / 32; w < units;
       w += stride) {
    const int64_t row = w / heads;
    const int h = int(w % heads);
    const int64_t at = (row * heads + h) * int64_t(dim);
    float sum = 0.0f;
    for (int d = lane; d < dim; d += 32) {
      sum = fmaf(load_as(dout, dout_dtype, at + d), load_as(out, out_dtype, at + d), sum);
    }
#pragma unroll
    for (int m = 16; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (lane == 0) {
      const int64_t b = row / seq, t = row % seq;
      delta[(b * heads + h) * seq + t] = sum;
    }
  }
}

// dK and dV of key block blockIdx.x of group blockIdx.y / chunks, batch blockIdx.z: the sum over
// the group's query heads (in order; those of chunk blockIdx.y % chunks when split) and their
// query blocks (in order) of
//   dV += (P * Z)^T dO,  dK += dS^T Q,  dS = P * (dP * Z - delta) * scale,  dP = dO V^T,
// with P = exp(scale q k - lse) recomputed and Z the dropout multipliers.
template <int D>
__global__ void __launch_bounds__(kThreads, backward_ctas(D))
    attention_dkdv_kernel(const BackwardParams p) {
  constexpr int cols = Tile<D>::cols;
  const Common& c = p.c;
  float* k_s = attention_smem;
  float* v_s = k_s + Tile<D>::floats;
  float* q_s = v_s + Tile<D>::floats;
  float* do_s = q_s + Tile<D>::floats;
  float* s_s = do_s + Tile<D>::floats;         // [64 keys, kScoreStride]: (P * Z)^T, then dS^T
  float* lse_s = s_s + kBlock * kScoreStride;  // [64]: base-2 lse of the query block's rows
  float* delta_s = lse_s + kBlock;             // [64]
  const int tx = int(threadIdx.x) % kGrid, ty = int(threadIdx.x) / kGrid;
  const int kb = int(blockIdx.x);
  const int g = int(blockIdx.y) / p.chunks, chunk = int(blockIdx.y) % p.chunks;
  const int b = int(blockIdx.z);
  const int j0 = kb * kBlock;
  const int k_rows = min_int(kBlock, c.seq - j0);
  const int64_t row0 = int64_t(b) * c.seq;
  const int64_t k_col = key_column(c, g, D);

  load_tile<D>(k_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col, c.width, k_rows, c.vec);
  load_tile<D>(v_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col + D, c.width, k_rows, c.vec);
  float dk[kPer][cols], dv[kPer][cols];
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int k = 0; k < cols; ++k) {
      dk[i][k] = 0.0f;
      dv[i][k] = 0.0f;
    }

  // Causal: query blocks before this key block see none of its keys; a block past the
  // sequence's keys is seen by none (its dK and dV are 0).
  const int keys = keys_of(c, b);
  const int qb_first = j0 >= keys ? c.blocks : c.causal ? kb : 0;
  const int h_begin = g * c.per_group + chunk * c.per_group / p.chunks;
  const int h_end = g * c.per_group + (chunk + 1) * c.per_group / p.chunks;
  for (int h = h_begin; h < h_end; ++h) {
    const int64_t q_col = query_column(c, h, D);
    const uint64_t base = head_base(c, b, h);
    const int64_t stats = (int64_t(b) * c.heads + h) * c.seq;  // lse and delta of row 0
    for (int qb = qb_first; qb < c.blocks; ++qb) {
      const int i0 = qb * kBlock;
      const int q_rows = min_int(kBlock, c.seq - i0);
      __syncthreads();  // the previous query block's tiles are no longer read
      load_tile<D>(q_s, c.qkv, c.qkv_dtype, (row0 + i0) * c.width + q_col, c.width, q_rows, c.vec);
      load_tile<D>(do_s, p.dout, p.dout_dtype, (row0 + i0) * c.out_width + int64_t(h) * D,
                   c.out_width, q_rows, c.vec);
      if (int(threadIdx.x) < kBlock) {
        const int r = int(threadIdx.x);
        lse_s[r] = r < q_rows ? p.lse[stats + i0 + r] * kLog2e : 0.0f;
        delta_s[r] = r < q_rows ? p.delta[stats + i0 + r] : 0.0f;
      }
      __syncthreads();

      // Transposed score tiles: rows are keys (ty + 16 i), columns queries (tx + 16 j).
      float st[kPer][kPer], dpt[kPer][kPer];
      product_abt<D>(k_s, q_s, tx, ty, st);
      product_abt<D>(v_s, do_s, tx, ty, dpt);
      // s_s is free (the barrier above follows the last read): it takes the multipliers first.
      if (c.dropout > 0.0f) dropout_tile(c, base, i0, j0, true, s_s, tx, ty);
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int kj = j0 + ty + kGrid * i;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int col = tx + kGrid * j;
          const int qi = i0 + col;
          const bool valid = visible(c, b, qi, kj, keys);
          const float prob = valid ? exp2f(st[i][j] * c.scale_log2 - lse_s[col]) : 0.0f;
          float* at = s_s + (ty + kGrid * i) * kScoreStride + col;
          const float z = c.dropout > 0.0f ? *at : 1.0f;
          st[i][j] = prob * (dpt[i][j] * z - delta_s[col]) * c.scale;  // dS^T
          *at = prob * z;                                              // (P * Z)^T
        }
      }
      __syncthreads();
      product_sb<D>(s_s, do_s, tx, ty, dv);
      __syncthreads();  // (P * Z)^T read: s_s takes dS^T
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          s_s[(ty + kGrid * i) * kScoreStride + tx + kGrid * j] = st[i][j];
      __syncthreads();
      product_sb<D>(s_s, q_s, tx, ty, dk);
    }
  }

  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  __syncthreads();  // q_s and do_s are free: stage dK and dV there
  stage<D>(q_s, dk, one, tx, ty);
  stage<D>(do_s, dv, one, tx, ty);
  __syncthreads();
  if (p.chunks == 1) {
    store_tile<D>(p.dqkv, p.dqkv_dtype, (row0 + j0) * c.width + k_col, c.width, q_s, k_rows, c.vec);
    store_tile<D>(p.dqkv, p.dqkv_dtype, (row0 + j0) * c.width + k_col + D, c.width, do_s, k_rows,
                  c.vec);
  } else {
    const int groups = c.heads / c.per_group;
    const int64_t at = (((int64_t(b) * groups + g) * p.chunks + chunk) * c.seq + j0) * (2 * D);
    store_tile<D>(p.partial, DType::F32, at, 2 * D, q_s, k_rows, true);
    store_tile<D>(p.partial, DType::F32, at + D, 2 * D, do_s, k_rows, true);
  }
}

__device__ __forceinline__ void store_as(void* p, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::Bf16:
      store(static_cast<__nv_bfloat16*>(p), i, v);
      break;
    case DType::F16:
      store(static_cast<__half*>(p), i, v);
      break;
    default:
      store(static_cast<float*>(p), i, v);
      break;
  }
}

// dK and dV (adjacent in a qkv row) of row b * seq + t, group g: the chunks' partial sums added
// in chunk order.
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_reduce_kernel(const BackwardParams p, int64_t rows, int dim) {
  const Common& c = p.c;
  const int groups = c.heads / c.per_group;
  const int64_t n = rows * groups * 2 * dim;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    const int e = int(i % (2 * dim));
    const int64_t rest = i / (2 * dim);
    const int g = int(rest % groups);
    const int64_t row = rest / groups;
    const int64_t b = row / c.seq, t = row % c.seq;
    const float* part = p.partial + ((b * groups + g) * p.chunks * c.seq + t) * (2 * dim) + e;
    float sum = 0.0f;
    for (int chunk = 0; chunk < p.chunks; ++chunk) sum += part[int64_t(chunk) * c.seq * (2 * dim)];
    store_as(p.dqkv, p.dqkv_dtype, row * c.width + key_column(c, g, dim) + e, sum);
  }
}

// dQ of query block (blocks - 1 - blockIdx.x) of head blockIdx.y, batch blockIdx.z: the sum
// over key blocks (in order) of dS K, with P and dP recomputed.
template <int D>
__global__ void __launch_bounds__(kThreads, backward_ctas(D))
    attention_dq_kernel(const BackwardParams p) {
  constexpr int cols = Tile<D>::cols;
  const Common& c = p.c;
  float* q_s = attention_smem;
  float* do_s = q_s + Tile<D>::floats;
  float* k_s = do_s + Tile<D>::floats;
  float* v_s = k_s + Tile<D>::floats;
  float* s_s = v_s + Tile<D>::floats;  // [64 queries, kScoreStride]: dS
  const int tx = int(threadIdx.x) % kGrid, ty = int(threadIdx.x) / kGrid;
  const int qb = c.blocks - 1 - int(blockIdx.x);
  const int h = int(blockIdx.y), b = int(blockIdx.z);
  const int i0 = qb * kBlock;
  const int q_rows = min_int(kBlock, c.seq - i0);
  const int64_t row0 = int64_t(b) * c.seq;
  const int64_t q_col = query_column(c, h, D);
  const int64_t k_col = key_column(c, h / c.per_group, D);
  const uint64_t base = head_base(c, b, h);
  const int64_t stats = (int64_t(b) * c.heads + h) * c.seq;

  load_tile<D>(q_s, c.qkv, c.qkv_dtype, (row0 + i0) * c.width + q_col, c.width, q_rows, c.vec);
  load_tile<D>(do_s, p.dout, p.dout_dtype, (row0 + i0) * c.out_width + int64_t(h) * D, c.out_width,
               q_rows, c.vec);
  float lse2[kPer], delta[kPer], acc[kPer][cols];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int qi = i0 + ty + kGrid * i;
    lse2[i] = qi < c.seq ? p.lse[stats + qi] * kLog2e : 0.0f;
    delta[i] = qi < c.seq ? p.delta[stats + qi] : 0.0f;
#pragma unroll
    for (int k = 0; k < cols; ++k) acc[i][k] = 0.0f;
  }

  const int keys = keys_of(c, b);
  const int kb_end = min_int(c.causal ? qb + 1 : c.blocks, (keys + kBlock - 1) / kBlock);
  for (int kb = 0; kb < kb_end; ++kb) {
    const int j0 = kb * kBlock;
    const int k_rows = min_int(kBlock, c.seq - j0);
    __syncthreads();  // the previous block's k_s, v_s, s_s are no longer read
    load_tile<D>(k_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col, c.width, k_rows, c.vec);
    load_tile<D>(v_s, c.qkv, c.qkv_dtype, (row0 + j0) * c.width + k_col + D, c.width, k_rows,
                 c.vec);
    __syncthreads();

    float s[kPer][kPer], dp[kPer][kPer];
    product_abt<D>(q_s, k_s, tx, ty, s);
    product_abt<D>(do_s, v_s, tx, ty, dp);
    // s_s is free (the barrier above follows the last read): it takes the multipliers first.
    if (c.dropout > 0.0f) dropout_tile(c, base, i0, j0, false, s_s, tx, ty);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int qi = i0 + ty + kGrid * i;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int kj = j0 + tx + kGrid * j;
        const bool valid = visible(c, b, qi, kj, keys);
        const float prob = valid ? exp2f(s[i][j] * c.scale_log2 - lse2[i]) : 0.0f;
        float* at = s_s + (ty + kGrid * i) * kScoreStride + tx + kGrid * j;
        const float z = c.dropout > 0.0f ? *at : 1.0f;
        *at = prob * (dp[i][j] * z - delta[i]) * c.scale;
      }
    }
    __syncthreads();
    product_sb<D>(s_s, k_s, tx, ty, acc);
  }

  const float one[kPer] = {1.0f, 1.0f, 1.0f, 1.0f};
  __syncthreads();  // q_s is free: stage dQ there
  stage<D>(q_s, acc, one, tx, ty);
  __syncthreads();
  store_tile<D>(p.dqkv, p.dqkv_dtype, (row0 + i0) * c.width + q_col, c.width, q_s, q_rows, c.vec);
}

// --- host side --------------------------------------------------------------------------------

bool aligned16(const Tensor& x) { return reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0; }

void require_float(const Tensor& x, const char* what, const char* op) {
  require_device(x, op);
  require(
      tensor::is_floating(x.dtype()), op,
      std::string(what) + " must be f32, bf16 or f16, got " + std::string(tensor::name(x.dtype())));
}

// Checks what both passes share and returns the kernels' view of it.
Common common_params(const Tensor& qkv, const AttentionShape& s, const AttentionOptions& o,
                     const char* op) {
  require(s.batch >= 0 && s.seq >= 0 && s.heads > 0 && s.groups > 0 && s.heads % s.groups == 0, op,
          "bad shape (heads must be a positive multiple of groups)");
  const int64_t d = s.head_dim;
  require(d == 32 || d == 64 || d == 80 || d == 96 || d == 128, op,
          "head_dim " + std::to_string(d) + " is not supported (supported: 32, 64, 80, 96, 128)");
  require(o.dropout >= 0.0f && o.dropout < 1.0f, op, "dropout must be in [0, 1)");
  // The flash kernels never hold a whole score matrix to add a bias to.
  require(o.bias == nullptr, op,
          "flash attention takes no score bias (options.bias): use cross_attention_forward and "
          "_backward with a packed shape");
  require(o.key_lengths.empty() || int64_t(o.key_lengths.size()) == s.batch, op,
          "key_lengths has " + std::to_string(o.key_lengths.size()) + " entries for a batch of " +
              std::to_string(s.batch));
  for (const int64_t keys : o.key_lengths)
    require(keys >= 1 && keys <= s.seq, op,
            "a key length of " + std::to_string(keys) + " is outside 1.." + std::to_string(s.seq));
  require(o.first_keys.empty() || int64_t(o.first_keys.size()) == s.batch * s.seq, op,
          "first_keys has " + std::to_string(o.first_keys.size()) + " entries for " +
              std::to_string(s.batch * s.seq) + " query rows");
  for (size_t r = 0; r < o.first_keys.size(); ++r)
    require(o.first_keys[r] >= 0 && o.first_keys[r] <= int64_t(r % size_t(s.seq)), op,
            "first_keys[" + std::to_string(r) + "] is outside 0..its row");
  require(s.seq <= INT_MAX - kBlock && s.batch <= 65535 && s.heads <= 65535, op,
          "shape too large (seq below 2^31 - 64, batch and heads at most 65535)");
  require_float(qkv, "qkv", op);
  require(qkv.numel() == s.batch * s.seq * s.qkv_width(), op,
          "qkv " + tensor::to_string(qkv.shape()) + " does not match the shape");
  Common c{};
  c.qkv = qkv.raw();
  c.width = s.qkv_width();
  c.out_width = s.heads * d;
  c.seq = int(s.seq);
  c.blocks = int((s.seq + kBlock - 1) / kBlock);
  c.heads = int(s.heads);
  c.per_group = int(s.heads / s.groups);
  c.scale = o.scale;
  c.scale_log2 = o.scale * kLog2e;
  c.dropout = o.dropout;
  c.keep_scale = 1.0f / (1.0f - o.dropout);
  c.rng = o.rng;
  c.total_heads = o.total_heads > 0 ? o.total_heads : s.heads;
  c.head_offset = o.head_offset;
  c.qkv_dtype = qkv.dtype();
  c.causal = o.causal;
  c.vec = aligned16(qkv);
  return c;
}

// Dynamic shared memory above the default 48 KiB must be opted into per kernel.
template <typename Kernel>
void allow_smem(Kernel* kernel, size_t bytes, const char* op) {
  if (bytes > 48 * 1024) {
    const std::string what = std::string(op) + ": " + std::to_string(bytes) +
                             " bytes of shared memory per block (sm_80 or newer needed)";
    check_cuda(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
        what.c_str());
  }
}

template <int D>
void launch_forward(cudaStream_t stream, const ForwardParams& p, int64_t batch, const char* op) {
  const size_t smem = forward_smem(D);
  allow_smem(attention_forward_kernel<D>, smem, op);
  const dim3 grid(unsigned(p.c.blocks), unsigned(p.c.heads), unsigned(batch));
  attention_forward_kernel<D><<<grid, kThreads, smem, stream>>>(p);
  check_launch(op);
}

template <int D>
void launch_backward(cudaStream_t stream, const BackwardParams& p, int64_t batch, int64_t groups,
                     const char* op) {
  const size_t dkdv = dkdv_smem(D), dq = dq_smem(D);
  allow_smem(attention_dkdv_kernel<D>, dkdv, op);
  allow_smem(attention_dq_kernel<D>, dq, op);
  const dim3 dkdv_grid(unsigned(p.c.blocks), unsigned(groups * p.chunks), unsigned(batch));
  attention_dkdv_kernel<D><<<dkdv_grid, kThreads, dkdv, stream>>>(p);
  check_launch(op);
  if (p.chunks > 1) {
    const int64_t rows = batch * p.c.seq;
    const unsigned blocks = grid_for(rows * groups * 2 * D);
    attention_dkdv_reduce_kernel<<<blocks, kThreads, 0, stream>>>(p, rows, D);
    check_launch(op);
  }
  const dim3 dq_grid(unsigned(p.c.blocks), unsigned(p.c.heads), unsigned(batch));
  attention_dq_kernel<D><<<dq_grid, kThreads, dq, stream>>>(p);
  check_launch(op);
}

}  // namespace

void attention_forward(cudaStream_t stream, const Tensor& qkv, const AttentionShape& shape,
                       const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const char* op = "attention_forward";
  ForwardParams p{};
  p.c = common_params(qkv, shape, options, op);
  require_float(out, "out", op);
  require(out.numel() == shape.batch * shape.seq * shape.heads * shape.head_dim, op,
          "out " + tensor::to_string(out.shape()) + " does not match the shape");
  require_device(lse, op);
  require(lse.dtype() == DType::F32 && lse.numel() == shape.batch * shape.heads * shape.seq, op,
          "lse must be f32 [batch, heads, seq]");
  if (shape.batch == 0 || shape.seq == 0) return;
  const DeviceKeyLengths key_lengths(stream, options.key_lengths, op);
  p.c.key_lengths = key_lengths.get();
  const DeviceKeyLengths first_keys(stream, options.first_keys, op);
  p.c.first_keys = first_keys.get();
  p.out = out.raw();
  p.out_dtype = out.dtype();
  p.lse = static_cast<float*>(lse.raw());
  p.c.vec = p.c.vec && aligned16(out);
  switch (shape.head_dim) {
    case 32:
      launch_forward<32>(stream, p, shape.batch, op);
      break;
    case 64:
      launch_forward<64>(stream, p, shape.batch, op);
      break;
    case 80:
      launch_forward<80>(stream, p, shape.batch, op);
      break;
    case 96:
      launch_forward<96>(stream, p, shape.batch, op);
      break;
    default:
      launch_forward<128>(stream, p, shape.batch, op);
      break;
  }
}

void attention_backward(cudaStream_t stream, Workspace& workspace, const Tensor& qkv,
                        const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const AttentionShape& shape, const AttentionOptions& options,
                        Tensor& dqkv) {
  const char* op = "attention_backward";
  BackwardParams p{};
  p.c = common_params(qkv, shape, options, op);
  require_float(dqkv, "dqkv", op);
  require_numel(qkv, dqkv, op);
  require_float(out, "out", op);
  require_float(dout, "dout", op);
  require(out.numel() == shape.batch * shape.seq * shape.heads * shape.head_dim, op,
          "out " + tensor::to_string(out.shape()) + " does not match the shape");
  require_numel(out, dout, op);
  require_device(lse, op);
  require(lse.dtype() == DType::F32 && lse.numel() == shape.batch * shape.heads * shape.seq, op,
          "lse must be f32 [batch, heads, seq]");
  if (shape.batch == 0 || shape.seq == 0) return;
  const DeviceKeyLengths key_lengths(stream, options.key_lengths, op);
  p.c.key_lengths = key_lengths.get();
  const DeviceKeyLengths first_keys(stream, options.first_keys, op);
  p.c.first_keys = first_keys.get();
  const int64_t rows = shape.batch * shape.seq;
  const int64_t base_ctas = int64_t(p.c.blocks) * shape.groups * shape.batch;
  const int64_t per_group = shape.heads / shape.groups;
  p.chunks = 1;
  if (per_group > 1 && base_ctas < kSplitBelow) {
    p.chunks = int(std::min(per_group, (kSplitBelow + base_ctas - 1) / base_ctas));
  }
  // Scratch: delta [batch, heads, seq] f32, then (256-byte aligned) the dK/dV partial sums.
  const size_t delta_bytes = (size_t(rows * shape.heads) * sizeof(float) + 255) / 256 * 256;
  const size_t partial_bytes =
      p.chunks > 1 ? size_t(rows * shape.groups * p.chunks * 2 * shape.head_dim) * sizeof(float)
                   : 0;
  auto* scratch = static_cast<char*>(workspace.get(delta_bytes + partial_bytes, stream));
  auto* delta = reinterpret_cast<float*>(scratch);
  p.partial = p.chunks > 1 ? reinterpret_cast<float*>(scratch + delta_bytes) : nullptr;
  attention_delta_kernel<<<grid_for(rows * shape.heads * 32), kThreads, 0, stream>>>(
      out.raw(), out.dtype(), dout.raw(), dout.dtype(), delta, rows, int(shape.seq),
      int(shape.heads), int(shape.head_dim));
  check_launch(op);

  p.dout = dout.raw();
  p.dout_dtype = dout.dtype();
  p.lse = static_cast<const float*>(lse.raw());
  p.delta = delta;
  p.dqkv = dqkv.raw();
  p.dqkv_dtype = dqkv.dtype();
  p.c.vec = p.c.vec && aligned16(dout) && aligned16(dqkv);
  switch (shape.head_dim) {
    case 32:
      launch_backward<32>(stream, p, shape.batch, shape.groups, op);
      break;
    case 64:
      launch_backward<64>(stream, p, shape.batch, shape.groups, op);
      break;
    case 80:
      launch_backward<80>(stream, p, shape.batch, shape.groups, op);
      break;
    case 96:
      launch_backward<96>(stream, p, shape.batch, shape.groups, op);
      break;
    default:
      launch_backward<128>(stream, p, shape.batch, shape.groups, op);
      break;
  }
}

}  // namespace megatron::kernels
