// Float storage whose dtype is known at run time, 8 elements at a time, and rows cut into slots of
// 8 elements: the loads and stores of the row kernels (norm, embedding, cross_entropy, rotary).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common.cuh"

namespace megatron::kernels::rows {

// --- float storage whose dtype is known at run time, 8 elements at a time ----------------------
// For kernels that take several float tensors whose dtypes vary independently: a template per
// dtype would compile every combination, so the dtype is a (block-uniform) run-time value instead.
// Loads return raw words and convert later, so that a thread issues all its loads before it
// waits for the first.
enum : int { kF32 = 0, kBf16 = 1, kF16 = 2 };

struct Floats {
  void* p = nullptr;
  int kind = kF32;
  __host__ __device__ int bytes() const { return kind == kF32 ? 4 : 2; }
  __host__ __device__ Floats at(int64_t offset) const {
    return {static_cast<char*>(p) + offset * bytes(), kind};
  }
};

inline Floats floats(const tensor::Tensor& t, const char* op, const char* what) {
  require_device(t, op);
  switch (t.dtype()) {
    case tensor::DType::F32: return {t.raw(), kF32};
    case tensor::DType::Bf16: return {t.raw(), kBf16};
    case tensor::DType::F16: return {t.raw(), kF16};
    default: break;
  }
  fail(op, std::string(what) + " must be a float tensor, got " +
               std::string(tensor::name(t.dtype())));
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Up to 8 elements' storage: word k holds f32 element k, or 16-bit elements 2k and 2k + 1.
// Elements past the count are zero.
struct Raw8 {
  uint32_t w[8];
};

__device__ __forceinline__ Raw8 load_raw8(Floats f, int64_t i, int count) {
  Raw8 r;
#pragma unroll
  for (int k = 0; k < 8; ++k) r.w[k] = 0;
  if (count <= 0) return r;
  if (f.kind == kF32) {
    const uint32_t* p = static_cast<const uint32_t*>(f.p) + i;
    if (count == 8 && aligned16(p)) {
      const uint4 a = reinterpret_cast<const uint4*>(p)[0];
      const uint4 b = reinterpret_cast<const uint4*>(p)[1];
      r.w[0] = a.x, r.w[1] = a.y, r.w[2] = a.z, r.w[3] = a.w;
      r.w[4] = b.x, r.w[5] = b.y, r.w[6] = b.z, r.w[7] = b.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k < count) r.w[k] = p[k];
      }
    }
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(f.p) + i;
    if (count == 8 && aligned16(p)) {
      const uint4 a = *reinterpret_cast<const uint4*>(p);
      r.w[0] = a.x, r.w[1] = a.y, r.w[2] = a.z, r.w[3] = a.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k < count) r.w[k >> 1] |= uint32_t{p[k]} << (16 * (k & 1));
      }
    }
  }
  return r;
}

__device__ __forceinline__ void to_floats(const Raw8& r, int kind, float (&v)[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t h = (r.w[k >> 1] >> (16 * (k & 1))) & 0xFFFFu;
    if (kind == kF32) {
      v[k] = __uint_as_float(r.w[k]);
    } else if (kind == kBf16) {
      v[k] = __uint_as_float(h << 16);
    } else {
      v[k] = __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
    }
  }
}

__device__ __forceinline__ void load8(Floats f, int64_t i, int count, float (&v)[8]) {
  to_floats(load_raw8(f, i, count), f.kind, v);
}

// Elements [i, i + count) of f = v[0, count), rounded to nearest even.
__device__ __forceinline__ void store8(Floats f, int64_t i, int count, const float (&v)[8]) {
  if (count <= 0) return;
  if (f.kind == kF32) {
    uint32_t* p = static_cast<uint32_t*>(f.p) + i;
    if (count == 8 && aligned16(p)) {
      reinterpret_cast<uint4*>(p)[0] = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                                  __float_as_uint(v[2]), __float_as_uint(v[3]));
      reinterpret_cast<uint4*>(p)[1] = make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]),
                                                  __float_as_uint(v[6]), __float_as_uint(v[7]));
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k < count) p[k] = __float_as_uint(v[k]);
      }
    }
    return;
  }
  uint32_t h[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    h[k] = f.kind == kBf16 ? uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(v[k]))}
                           : uint32_t{__half_as_ushort(__float2half_rn(v[k]))};
  }
  uint16_t* p = static_cast<uint16_t*>(f.p) + i;
  if (count == 8 && aligned16(p)) {
    *reinterpret_cast<uint4*>(p) = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16,
                                              h[4] | h[5] << 16, h[6] | h[7] << 16);
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < count) p[k] = static_cast<uint16_t>(h[k]);
    }
  }
}

// --- rows as slots of 8 elements -----------------------------------------------------------------
// A row [0, c) of a tensor is cut where its storage is 16-byte aligned: a head slot of the
// elements before the first aligned address (absent when the row starts aligned), then slots of
// 8 elements (whole 16- or 32-byte vectors), the last possibly short. Threads take slots
// threadIdx.x, + blockDim.x, ...: consecutive threads read consecutive vectors.
struct Slots {
  int64_t c;
  int64_t head;   // elements in the head slot
  int64_t first;  // 1 when there is a head slot
  int64_t count;  // slots

  __device__ Slots(Floats row, int64_t width) : c(width) {
    const auto skew = static_cast<int64_t>((16 - (reinterpret_cast<uintptr_t>(row.p) & 15)) & 15);
    head = min(skew / row.bytes(), c);
    first = head > 0 ? 1 : 0;
    count = first + (c - head + 7) / 8;
  }
  __device__ int64_t start(int64_t s) const { return s < first ? 0 : head + (s - first) * 8; }
  __device__ int size(int64_t s) const {
    if (s >= count) return 0;
    if (s < first) return static_cast<int>(head);
    const int64_t left = c - start(s);
    return left < 8 ? static_cast<int>(left) : 8;
  }
};

}  // namespace megatron::kernels::rows
