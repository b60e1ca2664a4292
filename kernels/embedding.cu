// The CUDA backend's embeddings, matching CpuBackend (tensor/cpu_embedding.cpp): a row gather
// forward, and a deterministic scatter-add backward that sorts the tokens by row (a stable radix
// sort) so that each row adds its tokens' gradients in token order, without atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <string>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/common.cuh"
#include "kernels/ops.hpp"
#include "kernels/row_access.cuh"

namespace megatron::kernels {
namespace {

using tensor::DType;

// --- float storage whose dtype is known at run time: kernels/row_access.cuh ----------------------
// The table, out and dout may each be any float dtype; a template per dtype would compile
// every combination, so the dtype is a (block-uniform) run-time value instead.
using namespace rows;

// --- forward -------------------------------------------------------------------------------------

constexpr int kWarps = 8;         // per block: one token (or sorted position) per warp
constexpr int64_t kTile = 256;    // columns per warp and step: 8 per lane
constexpr int64_t kChunk = 256;   // sorted positions summed by one warp at most (backward)

// out[i] = table[ids[i] - row_offset], or zeros for ids outside the table's rows; with
// accumulate, out[i] += instead (outside rows: unchanged). As the CPU: out = base + value in f32
// with base 0 unless accumulating, rounded to out's dtype.
__global__ void __launch_bounds__(kWarps * 32)
    embedding_forward_kernel(const int32_t* ids, Floats table, Floats out, int64_t n, int64_t rows,
                             int64_t hidden, int64_t row_offset, bool accumulate) {
  const int64_t lane = threadIdx.x & 31;
  const int64_t stride = int64_t{gridDim.x} * kWarps;
  for (int64_t i = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5); i < n; i += stride) {
    const int64_t row = int64_t{ids[i]} - row_offset;
    const bool inside = row >= 0 && row < rows;
    if (!inside && accumulate) continue;
    const Floats src = table.at(inside ? row * hidden : 0), dst = out.at(i * hidden);
    for (int64_t c0 = lane * 8; c0 < hidden; c0 += kTile) {
      const int count = static_cast<int>(min(int64_t{8}, hidden - c0));
      const Raw8 raw_value = load_raw8(src, c0, inside ? count : 0);
      const Raw8 raw_base = load_raw8(dst, c0, accumulate ? count : 0);
      float value[8], base[8];
      to_floats(raw_value, src.kind, value);
      to_floats(raw_base, dst.kind, base);
#pragma unroll
      for (int e = 0; e < 8; ++e) value[e] = base[e] + value[e];
      store8(dst, c0, count, value);
    }
  }
}

// --- backward ------------------------------------------------------------------------------------
// Tokens are sorted by key = their table row (rows for ids outside the table: last, ignored),
// stably, so each row's tokens form a run in token order. A run is cut at sorted positions that
// are multiples of kChunk: each later piece of a run is summed (in order) into a partial row of
// the workspace by embedding_chunk_kernel, then the warp owning the run's first position adds,
// in order, its own tokens and then those pieces' sums onto the table row, and writes it once.
// A run within one chunk therefore adds exactly as the CPU does: dtable[r] += dout[i] for its
// tokens i in order. Every (piece, 256-column tile) is one warp, so rows, pieces and columns
// run in parallel, and a frequent id (padding) costs kChunk sequential additions per piece.

__global__ void make_keys_kernel(const int32_t* ids, uint32_t* keys, int32_t* order, int64_t n,
                                 int64_t rows, int64_t row_offset) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t row = int64_t{ids[i]} - row_offset;
    keys[i] = static_cast<uint32_t>(row >= 0 && row < rows ? row : rows);
    order[i] = static_cast<int32_t>(i);
  }
}

// The first sorted position q in (p, limit) whose key is not `key`, else limit. Whole warp.
__device__ __forceinline__ int64_t run_end(const uint32_t* keys, int64_t p, int64_t limit,
                                           uint32_t key) {
  const int64_t lane = threadIdx.x & 31;
  for (int64_t base = p + 1; base < limit; base += 32) {
    const int64_t q = base + lane;
    const unsigned differs = __ballot_sync(0xFFFFFFFFu, q < limit && keys[q] != key);
    if (differs != 0) return base + __ffs(static_cast<int>(differs)) - 1;
  }
  return limit;
}

// acc += row order[q] of dout, columns [c0, c0 + count), for q in [begin, end) in order; four
// rows' loads in flight at a time.
__device__ __forceinline__ void add_rows(Floats dout, const int32_t* order, int64_t begin,
                                         int64_t end, int64_t hidden, int64_t c0, int count,
                                         float (&acc)[8]) {
  int64_t q = begin;
  for (; q + 4 <= end; q += 4) {
    int64_t token[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) token[u] = order[q + u];
    Raw8 raw[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) raw[u] = load_raw8(dout.at(token[u] * hidden), c0, count);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float g[8];
      to_floats(raw[u], dout.kind, g);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += g[e];
    }
  }
  for (; q < end; ++q) {
    float g[8];
    load8(dout.at(int64_t{order[q]} * hidden), c0, count, g);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += g[e];
  }
}

// Warp (m, tile): when sorted position p = m * kChunk continues a run begun before it, the sum
// of the run's tokens in [p, p + kChunk) goes to partial row m.
__global__ void __launch_bounds__(kWarps * 32)
    embedding_chunk_kernel(const uint32_t* keys, const int32_t* order, Floats dout,
                           float* partial, int64_t n, int64_t hidden, uint32_t rows) {
  const int64_t m = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  const int64_t p = m * kChunk;
  if (m == 0 || p >= n) return;
  const uint32_t key = keys[p];
  if (key >= rows || keys[p - 1] != key) return;
  const int64_t end = run_end(keys, p, min(n, p + kChunk), key);
  const int64_t c0 = int64_t{blockIdx.y} * kTile + (threadIdx.x & 31) * 8;
  if (c0 >= hidden) return;
  const int count = static_cast<int>(min(int64_t{8}, hidden - c0));
  float acc[8] = {};
  add_rows(dout, order, p, end, hidden, c0, count, acc);
  store8(Floats{partial + m * hidden, kF32}, c0, count, acc);
}

// Warp (p, tile): when sorted position p starts a run of a row inside the table, that row's
// columns of the tile: dtable += its tokens up to the next chunk boundary, then the partial
// sums of the run's later pieces, in order.
__global__ void __launch_bounds__(kWarps * 32)
    embedding_backward_kernel(const uint32_t* keys, const int32_t* order, Floats dout,
                              float* partial, float* dtable, int64_t n, int64_t hidden,
                              uint32_t rows) {
  const int64_t p = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  if (p >= n) return;
  const uint32_t key = keys[p];
  if (key >= rows || (p > 0 && keys[p - 1] == key)) return;
  const int64_t limit = min(n, (p / kChunk + 1) * kChunk);
  const int64_t end = run_end(keys, p, limit, key);
  const int64_t c0 = int64_t{blockIdx.y} * kTile + (threadIdx.x & 31) * 8;
  if (c0 >= hidden) return;
  const int count = static_cast<int>(min(int64_t{8}, hidden - c0));
  const Floats row{dtable + int64_t{key} * hidden, kF32};
  float acc[8];
  load8(row, c0, count, acc);
  add_rows(dout, order, p, end, hidden, c0, count, acc);
  // The run goes on past a chunk boundary exactly when the key there is still ours; four
  // boundaries' keys, then four pieces, in flight at a time (a run's boundaries are consecutive,
  // so once one is not ours none after it is).
  for (int64_t q = limit; q < n; q += 4 * kChunk) {
    bool ours[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t at = q + u * kChunk;
      ours[u] = at < n && keys[at] == key;
    }
    Raw8 raw[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const Floats piece{partial + (q / kChunk + u) * hidden, kF32};
      raw[u] = load_raw8(piece, c0, ours[u] ? count : 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float piece[8];
      to_floats(raw[u], kF32, piece);
      if (ours[u]) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] += piece[e];
      }
    }
    if (!ours[3]) break;
  }
  store8(row, c0, count, acc);
}

// --- host side -----------------------------------------------------------------------------------

void check_ids(const Tensor& ids, const char* op) {
  require_device(ids, op);
  require(ids.dtype() == DType::I32, op, "ids must be i32");
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void embedding_forward(cudaStream_t stream, const Tensor& ids, const Tensor& table, Tensor& out,
                       int64_t row_offset, bool accumulate) {
  const char* op = "embedding_forward";
  check_ids(ids, op);
  require(table.rank() >= 1, op, "table must have rows");
  const int64_t rows = table.dim(0), hidden = table.row_size(), n = ids.numel();
  require(out.numel() == n * hidden, op,
          "out " + tensor::to_string(out.shape()) + " is not [ids, " + std::to_string(hidden) +
              "]");
  const Floats ft = floats(table, op, "table"), fo = floats(out, op, "out");
  if (n == 0 || hidden == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((n + kWarps - 1) / kWarps, int64_t{1} << 20));
  embedding_forward_kernel<<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const int32_t*>(ids.raw()), ft, fo, n, rows, hidden, row_offset, accumulate);
  check_launch(op);
}

void embedding_backward(cudaStream_t stream, Workspace& workspace, const Tensor& ids,
                        const Tensor& dout, Tensor& dtable, int64_t row_offset) {
  const char* op = "embedding_backward";
  check_ids(ids, op);
  require_device(dtable, op);
  require(dtable.dtype() == DType::F32 && dtable.rank() >= 1, op, "dtable must be f32 with rows");
  const int64_t rows = dtable.dim(0), hidden = dtable.row_size(), n = ids.numel();
  require(dout.numel() == n * hidden, op,
          "dout " + tensor::to_string(dout.shape()) + " is not [ids, " + std::to_string(hidden) +
              "]");
  const Floats fdout = floats(dout, op, "dout");
  if (n == 0 || hidden == 0 || rows == 0) return;
  require(n <= INT_MAX && rows <= INT_MAX, op, "at most 2^31 - 1 ids and table rows");
  const int64_t tiles = (hidden + kTile - 1) / kTile;
  require(tiles <= 65535, op, "rows wider than " + std::to_string(65535 * kTile));

  // Keys 0..rows (rows: outside the table) need only this many bits: fewer radix passes.
  const int end_bit = std::bit_width(static_cast<uint32_t>(rows));
  const int count = static_cast<int>(n);
  size_t sort_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr),
                                             static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), count, 0, end_bit,
                                             stream),
             op);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const size_t keys_bytes = align_up(size_t(n) * sizeof(uint32_t));
  const size_t order_bytes = align_up(size_t(n) * sizeof(int32_t));
  const size_t partial_bytes = align_up(size_t(chunks * hidden) * sizeof(float));
  char* base = static_cast<char*>(workspace.get(
      2 * keys_bytes + 2 * order_bytes + partial_bytes + align_up(std::max<size_t>(sort_bytes, 1)),
      stream));
  auto* keys_in = reinterpret_cast<uint32_t*>(base);
  auto* keys_out = reinterpret_cast<uint32_t*>(base + keys_bytes);
  auto* order_in = reinterpret_cast<int32_t*>(base + 2 * keys_bytes);
  auto* order_out = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + order_bytes);
  auto* partial = reinterpret_cast<float*>(base + 2 * keys_bytes + 2 * order_bytes);
  void* sort_temp = base + 2 * keys_bytes + 2 * order_bytes + partial_bytes;

  make_keys_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const int32_t*>(ids.raw()),
                                                     keys_in, order_in, n, rows, row_offset);
  check_launch(op);
  check_cuda(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys_in, keys_out, order_in,
                                             order_out, count, 0, end_bit, stream),
             op);
  const auto sentinel = static_cast<uint32_t>(rows);
  if (chunks > 1) {
    const dim3 grid(static_cast<unsigned>((chunks + kWarps - 1) / kWarps),
                    static_cast<unsigned>(tiles));
    embedding_chunk_kernel<<<grid, kWarps * 32, 0, stream>>>(keys_out, order_out, fdout, partial,
                                                             n, hidden, sentinel);
    check_launch(op);
  }
  const dim3 grid(static_cast<unsigned>((n + kWarps - 1) / kWarps), static_cast<unsigned>(tiles));
  embedding_backward_kernel<<<grid, kWarps * 32, 0, stream>>>(
      keys_out, order_out, fdout, partial, static_cast<float*>(dtable.raw()), n, hidden, sentinel);
  check_launch(op);
}

}  // namespace megatron::kernels
