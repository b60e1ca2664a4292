// The CUDA backend's memory and elementwise ops: fill, copy (casts), add, axpy, scale, bias add
// and bias gradient, matching CpuBackend (tensor/cpu_backend.cpp, tensor/cpu_elementwise.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/flat_access.cuh"
#include "kernels/ops.hpp"
#include "tensor/half.hpp"

namespace megatron::kernels {
namespace {

// Float storage of any dtype, 8 consecutive elements at a time: kernels/flat_access.cuh.
using namespace flat;


struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Axpy {  // f(x, y) = y + alpha x, as the CPU writes it
  float alpha;
  __device__ float operator()(float x, float y) const { return y + alpha * x; }
};
struct Scale {
  float alpha;
  __device__ float operator()(float v) const { return v * alpha; }
};

// --- fill ----------------------------------------------------------------------------------------

// n words of `word`; pattern holds the word repeated over 16 bytes.
template <typename Word>
__global__ void fill_kernel(Word* p, int64_t n, Word word, uint4 pattern, bool vec) {
  constexpr int64_t kPer = 16 / sizeof(Word);
  const int64_t first = thread_index(), stride = thread_count();
  int64_t done = 0;
  if (vec) {
    const int64_t groups = n / kPer;
    for (int64_t g = first; g < groups; g += stride) reinterpret_cast<uint4*>(p)[g] = pattern;
    done = groups * kPer;
  }
  for (int64_t i = done + first; i < n; i += stride) p[i] = word;
}

template <typename Word>
void fill_words(cudaStream_t stream, void* p, int64_t n, Word word) {
  uint32_t lanes[4];
  unsigned char bytes[16];
  for (size_t k = 0; k < 16; k += sizeof(Word)) std::memcpy(bytes + k, &word, sizeof(Word));
  std::memcpy(lanes, bytes, 16);
  const uint4 pattern = make_uint4(lanes[0], lanes[1], lanes[2], lanes[3]);
  const int64_t per = int64_t(16 / sizeof(Word));
  fill_kernel<<<grid_for((n + per - 1) / per, kThreads), kThreads, 0, stream>>>(
      static_cast<Word*>(p), n, word, pattern, aligned16(p));
}

// --- copy: casts bit for bit as tensor/half.cpp, NaNs included -----------------------------------

__device__ __forceinline__ float exact_f32(float v) { return v; }
__device__ __forceinline__ float exact_f32(__nv_bfloat16 v) {
  return __uint_as_float(uint32_t{__bfloat16_as_ushort(v)} << 16);
}
// tensor::to_float(f16): NaN keeps its payload and is made quiet; everything else is exact.
__device__ __forceinline__ float exact_f32(__half v) {
  const uint32_t h = __half_as_ushort(v);
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0) {
    return __uint_as_float(((h & 0x8000u) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13));
  }
  return __half2float(v);
}
__device__ __forceinline__ void exact_set(float& out, float v) { out = v; }
// tensor::to_bf16: NaN keeps its top payload bits, made quiet; else round to nearest even.
__device__ __forceinline__ void exact_set(__nv_bfloat16& out, float v) {
  const uint32_t x = __float_as_uint(v);
  const uint32_t bits = (x & 0x7FFFFFFFu) > 0x7F800000u ? (x >> 16) | 0x0040u
                                                        : (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  out = __ushort_as_bfloat16(static_cast<unsigned short>(bits));
}
// tensor::to_f16: NaN as to_bf16 does; every other value rounds to nearest even, which the
// hardware conversion does identically (overflow to infinity from 65520, subnormals included).
__device__ __forceinline__ void exact_set(__half& out, float v) {
  const uint32_t x = __float_as_uint(v), magnitude = x & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {
    out = __ushort_as_half(static_cast<unsigned short>(((x >> 16) & 0x8000u) | 0x7E00u |
                                                       ((magnitude >> 13) & 0x3FFu)));
  } else {
    out = __float2half_rn(v);
  }
}

template <typename In, typename Out>
__global__ void cast_kernel(const In* in, Out* out, int64_t n, bool vec) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    In a[kVec];
    Out b[kVec];
    load_raw8(in, g * kVec, vec, a);
#pragma unroll
    for (int k = 0; k < kVec; ++k) exact_set(b[k], exact_f32(a[k]));
    store_raw8(out, g * kVec, vec, b);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) exact_set(out[i], exact_f32(in[i]));
}

// --- bias ----------------------------------------------------------------------------------------

struct Rows {
  int64_t n = 0;
  int64_t c = 0;
};

Rows rows_of(const Tensor& x, const char* op) {
  require(x.rank() >= 1, op, "expected at least one dimension, got a scalar");
  const int64_t c = x.dim(-1);
  return {c == 0 ? 0 : x.numel() / c, c};
}

// x[i] += bias[i % c]. With vec, c % kVec == 0, so a group never crosses a row and its bias
// elements are 16-byte aligned too.
__global__ void bias_add_kernel(Floats x, Floats bias, int64_t total, int64_t c, bool vec) {
  const int64_t groups = total / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t begin = g * kVec;
    float vx[kVec], vb[kVec];
    read8(x, begin, vec, vx);
    if (vec) {
      read8(bias, begin % c, true, vb);
    } else {
      int64_t col = begin % c;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        vb[k] = read(bias, col);
        col = col + 1 == c ? 0 : col + 1;
      }
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) vx[k] += vb[k];
    write8(x, begin, vec, vx);
  }
  const int64_t i = groups * kVec + first;
  if (i < total) write(x, i, read(x, i) + read(bias, i % c));
}

// Column sums of dy [n, c] over rows [chunk * rows, (chunk + 1) * rows) for chunk = blockIdx.y,
// columns blockIdx.x * 32 + threadIdx.x: each of the block's 8 thread rows sums every 8th row in
// order, then thread row 0 adds the 8 sums in order. The sum goes to dbias (one chunk: added to
// it) or to partial[chunk * c + col]; the order is fixed by n and c alone.
constexpr int kGradCols = 32, kGradRows = 8;

__global__ void bias_grad_kernel(Floats dy, int64_t n, int64_t c, int64_t rows, float* dbias,
                                 float* partial) {
  __shared__ float sums[kGradRows][kGradCols + 1];
  const int64_t col = int64_t(blockIdx.x) * kGradCols + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows;
  const int64_t end = begin + rows < n ? begin + rows : n;
  float acc = 0.0f;
  if (col < c) {
    for (int64_t row = begin + threadIdx.y; row < end; row += kGradRows) {
      acc += read(dy, row * c + col);
    }
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < c) {
    float total = sums[0][threadIdx.x];
#pragma unroll
    for (int k = 1; k < kGradRows; ++k) total += sums[k][threadIdx.x];
    if (partial) {
      partial[int64_t(blockIdx.y) * c + col] = total;
    } else {
      dbias[col] += total;
    }
  }
}

// dbias[j] += the chunks' partial sums of column j, added in chunk order.
__global__ void bias_grad_finish_kernel(const float* partial, int64_t chunks, int64_t c,
                                        float* dbias) {
  for (int64_t j = thread_index(); j < c; j += thread_count()) {
    float total = partial[j];
    for (int64_t k = 1; k < chunks; ++k) total += partial[k * c + j];
    dbias[j] += total;
  }
}

}  // namespace

// --- memory and casts ----------------------------------------------------------------------------

void fill(cudaStream_t stream, Tensor& x, double value) {
  const char* op = "fill";
  require_device(x, op);
  const int64_t n = x.numel();
  if (n == 0) return;
  // As the CPU: zero (of either sign) clears the bytes; else the value converted to the dtype
  // on the host (tensor::to_bf16 and to_f16, so the bits are the CPU's) and stored as words.
  if (value == 0.0) {
    check_cuda(cudaMemsetAsync(x.raw(), 0, x.bytes(), stream), op);
    return;
  }
  const float f = static_cast<float>(value);
  switch (x.dtype()) {
    case tensor::DType::I32:
      fill_words(stream, x.raw(), n, static_cast<uint32_t>(static_cast<int32_t>(value)));
      break;
    case tensor::DType::I64:
      fill_words(stream, x.raw(), n, static_cast<uint64_t>(static_cast<int64_t>(value)));
      break;
    case tensor::DType::F32:
      fill_words(stream, x.raw(), n, std::bit_cast<uint32_t>(f));
      break;
    case tensor::DType::Bf16:
      fill_words(stream, x.raw(), n, tensor::to_bf16(f).bits);
      break;
    case tensor::DType::F16:
      fill_words(stream, x.raw(), n, tensor::to_f16(f).bits);
      break;
  }
  check_launch(op);
}

void copy(cudaStream_t stream, const Tensor& src, Tensor& dst) {
  const char* op = "copy";
  require_device(src, op);
  require_device(dst, op);
  require_numel(src, dst, op);
  if (src.dtype() == dst.dtype()) {
    if (src.raw() != dst.raw() && src.bytes() != 0) {
      check_cuda(
          cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, stream), op);
    }
    return;
  }
  if (!tensor::is_floating(src.dtype()) || !tensor::is_floating(dst.dtype())) {
    fail(op,
         std::string(tensor::name(src.dtype())) + " to " + std::string(tensor::name(dst.dtype())));
  }
  const int64_t n = src.numel();
  if (n == 0) return;
  const bool vec = aligned16(src.raw()) && aligned16(dst.raw());
  with_floats(src, [&](auto* in) {
    with_floats(dst, [&](auto* out) {
      // Equal dtypes were copied above: only the six casts are compiled.
      if constexpr (!std::is_same_v<decltype(in), decltype(out)>) {
        cast_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(in, out, n, vec);
      }
    });
  });
  check_launch(op);
}

// --- elementwise ---------------------------------------------------------------------------------

void add(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& out) {
  map2(stream, a, b, out, "add", Add{});
}

void axpy(cudaStream_t stream, float alpha, const Tensor& x, Tensor& y) {
  map2(stream, x, y, y, "axpy", Axpy{alpha});
}

void scale(cudaStream_t stream, Tensor& x, float alpha) { map1(stream, x, x, "scale", Scale{alpha}); }

void bias_add(cudaStream_t stream, Tensor& x, const Tensor& bias) {
  const char* op = "bias_add";
  require_float(x, op);
  require_float(bias, op);
  const Rows r = rows_of(x, op);
  require(
      bias.numel() == r.c, op,
      "bias " + tensor::to_string(bias.shape()) + " for rows of " + tensor::to_string(x.shape()));
  const int64_t total = x.numel();
  if (total == 0) return;
  const bool vec = r.c % kVec == 0 && aligned16(x.raw()) && aligned16(bias.raw());
  bias_add_kernel<<<grid_for_vec(total), kThreads, 0, stream>>>(floats(x), floats(bias), total, r.c,
                                                                vec);
  check_launch(op);
}

void bias_grad(cudaStream_t stream, Workspace& workspace, const Tensor& dy, Tensor& dbias) {
  const char* op = "bias_grad";
  require_float(dy, op);
  require_device(dbias, op);
  const Rows r = rows_of(dy, op);
  require(dbias.dtype() == tensor::DType::F32 && dbias.numel() == r.c, op,
          "dbias must be f32 with " + std::to_string(r.c) + " elements, got " +
              std::string(tensor::name(dbias.dtype())) + " " + tensor::to_string(dbias.shape()));
  if (r.n == 0 || r.c == 0) return;
  // Row chunks: enough blocks to fill the device (about 1024 with the column tiles), at least
  // 32 rows each; a function of n and c only, so the summation order is too.
  const int64_t tiles = (r.c + kGradCols - 1) / kGradCols;
  const int64_t wanted =
      std::clamp<int64_t>((1024 + tiles - 1) / tiles, 1, std::min<int64_t>((r.n + 31) / 32, 1024));
  const int64_t rows = (r.n + wanted - 1) / wanted;
  const int64_t chunks = (r.n + rows - 1) / rows;
  float* partial = nullptr;
  if (chunks > 1) {
    partial = static_cast<float*>(
        workspace.get(static_cast<size_t>(chunks * r.c) * sizeof(float), stream));
  }
  float* out = static_cast<float*>(dbias.raw());
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  const dim3 block(kGradCols, kGradRows);
  bias_grad_kernel<<<grid, block, 0, stream>>>(floats(dy), r.n, r.c, rows, out, partial);
  check_launch(op);
  if (chunks > 1) {
    bias_grad_finish_kernel<<<grid_for(r.c, kThreads), kThreads, 0, stream>>>(partial, chunks, r.c,
                                                                              out);
    check_launch(op);
  }
}

}  // namespace megatron::kernels
