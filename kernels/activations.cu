// The CUDA backend's activations and dropout: GELU (erf and tanh forms), SwiGLU and dropout with
// the Philox mask of tensor/random.hpp, the same formulas as tensor/cpu_elementwise.cpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common.cuh"
#include "kernels/flat_access.cuh"
#include "kernels/ops.hpp"
#include "tensor/random.hpp"

namespace megatron::kernels {
namespace {

// Float storage of any dtype, 8 consecutive elements at a time: kernels/flat_access.cuh.
using namespace flat;

// --- the CPU's math ------------------------------------------------------------------------------

// cpu::fast_exp (tensor/cpu_fast_exp.hpp): Cephes' expf, 0 below -87 and saturating at e^88, so
// that extreme inputs behave as on the CPU.
__device__ __forceinline__ float fast_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  constexpr float kShift = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t exponent = __float_as_int(shifted) - __float_as_int(kShift);
  const float two_to_n = __int_as_float((exponent + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_to_n;
}

// erf by Abramowitz & Stegun 7.1.26, as the CPU's erf_approx.
__device__ __forceinline__ float erf_approx(float x) {
  const float a = fabsf(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  r = r * t;
  return copysignf(1.0f - r * fast_exp(-a * a), x);
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

struct GeluErf {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + erf_approx(x * kInvSqrt2));
  }
};
struct GeluTanh {  // 0.5 x (1 + tanh u) = x sigmoid(2u)
  __device__ float operator()(float x) const {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return x * sigmoid(2.0f * u);
  }
};
struct GeluErfBackward {  // f(dy, x) = dy gelu'(x)
  __device__ float operator()(float g, float x) const {
    return g *
           (0.5f * (1.0f + erf_approx(x * kInvSqrt2)) + x * kInvSqrt2Pi * fast_exp(-0.5f * x * x));
  }
};
struct GeluTanhBackward {  // d/dx of x sigmoid(2u) = s + 2 x s (1 - s) du/dx
  __device__ float operator()(float g, float x) const {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    const float s = sigmoid(2.0f * u);
    return g * (s + 2.0f * x * s * (1.0f - s) * du);
  }
};



// --- SwiGLU --------------------------------------------------------------------------------------

// Gate and up of elements [e, e + 8) of y [n, f] (x [n, 2f] holds [gate | up] per row). With vec,
// f % 8 == 0, so the group lies in one row and both halves are 16-byte aligned.
__device__ __forceinline__ void read_gate_up(Floats x, int64_t e, int64_t f, bool vec,
                                             float (&gate)[kVec], float (&up)[kVec]) {
  int64_t row = e / f, col = e - row * f;
  if (vec) {
    read8(x, row * 2 * f + col, true, gate);
    read8(x, row * 2 * f + f + col, true, up);
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    gate[k] = read(x, row * 2 * f + col);
    up[k] = read(x, row * 2 * f + f + col);
    if (++col == f) {
      col = 0;
      ++row;
    }
  }
}

// The gated units' gates, as the CPU writes them (tensor/cpu_elementwise.cpp).
struct SiluGate {
  __device__ static float value(float a) { return a * sigmoid(a); }
  // d silu(a)/da = s (1 + a (1 - s)) with s = sigmoid(a).
  __device__ static void grads(float dy, float a, float u, float& dgate, float& dup) {
    const float s = sigmoid(a);
    dgate = dy * u * s * (1.0f + a * (1.0f - s));
    dup = dy * a * s;
  }
};
struct GeluTanhGate {
  __device__ static float value(float a) { return GeluTanh{}(a); }
  __device__ static void grads(float dy, float a, float u, float& dgate, float& dup) {
    dgate = GeluTanhBackward{}(dy * u, a);
    dup = dy * GeluTanh{}(a);
  }
};

template <class Gate>
__global__ void glu_forward_kernel(Floats x, Floats y, int64_t total, int64_t f, bool vec) {
  const int64_t groups = total / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    float gate[kVec], up[kVec];
    read_gate_up(x, g * kVec, f, vec, gate, up);
#pragma unroll
    for (int k = 0; k < kVec; ++k) gate[k] = Gate::value(gate[k]) * up[k];
    write8(y, g * kVec, vec, gate);
  }
  const int64_t i = groups * kVec + first;
  if (i < total) {
    const int64_t at = i + (i / f) * f;  // row * 2f + col
    write(y, i, Gate::value(read(x, at)) * read(x, at + f));
  }
}

template <class Gate>
__global__ void glu_backward_kernel(Floats dy, Floats x, Floats dx, int64_t total, int64_t f,
                                    bool vec) {
  const int64_t groups = total / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t e = g * kVec;
    float gate[kVec], up[kVec], d[kVec];
    read_gate_up(x, e, f, vec, gate, up);
    read8(dy, e, vec, d);
#pragma unroll
    for (int k = 0; k < kVec; ++k) Gate::grads(d[k], gate[k], up[k], gate[k], up[k]);
    int64_t row = e / f, col = e - row * f;
    if (vec) {
      write8(dx, row * 2 * f + col, true, gate);
      write8(dx, row * 2 * f + f + col, true, up);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        write(dx, row * 2 * f + col, gate[k]);
        write(dx, row * 2 * f + f + col, up[k]);
        if (++col == f) {
          col = 0;
          ++row;
        }
      }
    }
  }
  const int64_t i = groups * kVec + first;
  if (i < total) {
    const int64_t at = i + (i / f) * f;
    float dgate, dup;
    Gate::grads(read(dy, i), read(x, at), read(x, at + f), dgate, dup);
    write(dx, at, dgate);
    write(dx, at + f, dup);
  }
}

// y [.., f] for x [.., 2f] (or dy for swiglu_backward): f, or throws as the CPU does.
int64_t swiglu_width(const Tensor& x, const Tensor& y, const char* op, const char* what) {
  require(y.rank() >= 1, op, "expected at least one dimension, got a scalar");
  const int64_t f = y.dim(-1);
  require(x.rank() >= 1 && x.dim(-1) == 2 * f && x.numel() == 2 * y.numel(), op,
          "x " + tensor::to_string(x.shape()) + " must be [.., 2f] for " + what + " " +
              tensor::to_string(y.shape()));
  return f;
}

// --- dropout -------------------------------------------------------------------------------------

// Uniforms of elements base .. base + 7 of the key's numbering (uniform_at's values): the
// words of Philox blocks base / 4 .. base / 4 + 2, shifted by base % 4. The shift is the same in
// every thread (the key's offset modulo 4), so the third block is drawn only where an offset
// splits blocks, and the words stay in registers.
__device__ __forceinline__ void uniforms8(const RngKey& key, uint64_t base, float (&u)[kVec]) {
  const uint64_t block = base / 4;
  const unsigned shift = unsigned(base % 4);
  uint32_t w[12];
  const auto b0 = tensor::philox_block(key, block);
  const auto b1 = tensor::philox_block(key, block + 1);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    w[k] = b0[k];
    w[4 + k] = b1[k];
    w[8 + k] = 0;
  }
  if (shift != 0) {
    const auto b2 = tensor::philox_block(key, block + 2);
#pragma unroll
    for (int k = 0; k < 4; ++k) w[8 + k] = b2[k];
  }
  if (shift & 1u) {
#pragma unroll
    for (int k = 0; k < 11; ++k) w[k] = w[k + 1];
  }
  if (shift & 2u) {
#pragma unroll
    for (int k = 0; k < 10; ++k) w[k] = w[k + 2];
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) u[k] = tensor::uniform_from_bits(w[k]);
}

// The CPU's dropout_apply: kept (u >= p) elements are x * scale, dropped ones exactly 0 (even
// where x is not finite), plus the residual when there is one. The product and the sum are
// rounded separately (__fmul_rn, __fadd_rn), never fused, so the results are the CPU's bits.
__device__ __forceinline__ float dropout_value(float x, float u, float p, float scale) {
  return u >= p ? __fmul_rn(x, scale) : 0.0f;
}

// x + bias as bias_add stores it: the f32 sum rounded to x's dtype.
__device__ __forceinline__ float add_bias_as_stored(float v, float b, tensor::DType dtype) {
  const float sum = __fadd_rn(v, b);
  if (dtype == tensor::DType::Bf16) return __bfloat162float(__float2bfloat16_rn(sum));
  if (dtype == tensor::DType::F16) return __half2float(__float2half_rn(sum));
  return sum;
}

// residual.data null: no residual; bias.data null: no bias (else bias[i % columns] is added
// to x first).
__global__ void dropout_kernel(Floats x, Floats residual, Floats y, int64_t n, bool vec, float p,
                               float scale, RngKey key, Floats bias, int64_t columns) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t e = g * kVec;
    float v[kVec], u[kVec], r[kVec];
    read8(x, e, vec, v);
    if (bias.data) {
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        v[k] = add_bias_as_stored(v[k], read(bias, (e + k) % columns), x.dtype);
    }
    uniforms8(key, key.offset + uint64_t(e), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = dropout_value(v[k], u[k], p, scale);
    if (residual.data) {
      read8(residual, e, vec, r);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = __fadd_rn(r[k], v[k]);
    }
    write8(y, e, vec, v);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) {
    float xi = read(x, i);
    if (bias.data) xi = add_bias_as_stored(xi, read(bias, i % columns), x.dtype);
    float v = dropout_value(xi, tensor::uniform_at(key, key.offset + uint64_t(i)), p, scale);
    if (residual.data) v = __fadd_rn(read(residual, i), v);
    write(y, i, v);
  }
}

void dropout_apply(cudaStream_t stream, const Tensor& x, const Tensor* residual, Tensor& y, float p,
                   RngKey key, const char* op, const Tensor* bias = nullptr) {
  require(p >= 0.0f && p <= 1.0f, op, "dropout probability " + std::to_string(p));
  require_float(x, op);
  require_float(y, op);
  require_numel(x, y, op);
  if (residual) {
    require_float(*residual, op);
    require_numel(x, *residual, op);
  }
  const int64_t n = x.numel();
  if (n == 0) return;
  // On the host in f32, as the CPU computes it; p == 1 drops everything (u < 1 always).
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  bool vec = aligned16(x.raw()) && aligned16(y.raw());
  if (residual) vec = vec && aligned16(residual->raw());
  int64_t columns = 1;
  if (bias) {
    require_float(*bias, op);
    columns = bias->numel();
    require(columns > 0 && n % columns == 0, op,
            "bias of " + std::to_string(columns) + " for rows of " + std::to_string(n) + " elements");
  }
  dropout_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(
      floats(x), residual ? floats(*residual) : Floats{}, floats(y), n, vec, p, scale, key,
      bias ? floats(*bias) : Floats{}, columns);
  check_launch(op);
}

}  // namespace

void gelu_forward(cudaStream_t stream, const Tensor& x, Tensor& y, bool tanh_approx) {
  if (tanh_approx) {
    map1(stream, x, y, "gelu_forward", GeluTanh{});
  } else {
    map1(stream, x, y, "gelu_forward", GeluErf{});
  }
}

void gelu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx,
                   bool tanh_approx) {
  if (tanh_approx) {
    map2(stream, dy, x, dx, "gelu_backward", GeluTanhBackward{});
  } else {
    map2(stream, dy, x, dx, "gelu_backward", GeluErfBackward{});
  }
}

namespace {

template <class Gate>
void glu_forward(cudaStream_t stream, const Tensor& x, Tensor& y, const char* op) {
  require_float(x, op);
  require_float(y, op);
  const int64_t f = swiglu_width(x, y, op, "y");
  const int64_t total = y.numel();
  if (total == 0) return;
  const bool vec = f % kVec == 0 && aligned16(x.raw()) && aligned16(y.raw());
  glu_forward_kernel<Gate><<<grid_for_vec(total), kThreads, 0, stream>>>(floats(x), floats(y),
                                                                         total, f, vec);
  check_launch(op);
}

template <class Gate>
void glu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx,
                  const char* op) {
  require_float(dy, op);
  require_float(x, op);
  require_float(dx, op);
  const int64_t f = swiglu_width(x, dy, op, "dy");
  require_numel(x, dx, op);
  const int64_t total = dy.numel();
  if (total == 0) return;
  const bool vec =
      f % kVec == 0 && aligned16(dy.raw()) && aligned16(x.raw()) && aligned16(dx.raw());
  glu_backward_kernel<Gate><<<grid_for_vec(total), kThreads, 0, stream>>>(
      floats(dy), floats(x), floats(dx), total, f, vec);
  check_launch(op);
}

}  // namespace

void swiglu_forward(cudaStream_t stream, const Tensor& x, Tensor& y) {
  glu_forward<SiluGate>(stream, x, y, "swiglu_forward");
}

void swiglu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx) {
  glu_backward<SiluGate>(stream, dy, x, dx, "swiglu_backward");
}

void geglu_forward(cudaStream_t stream, const Tensor& x, Tensor& y) {
  glu_forward<GeluTanhGate>(stream, x, y, "geglu_forward");
}

void geglu_backward(cudaStream_t stream, const Tensor& dy, const Tensor& x, Tensor& dx) {
  glu_backward<GeluTanhGate>(stream, dy, x, dx, "geglu_backward");
}

// p == 0 copies (and dropout_add adds), as the CPU does, without drawing any numbers.
void dropout_forward(cudaStream_t stream, const Tensor& x, Tensor& y, float p, RngKey key) {
  if (p == 0.0f) {
    require_numel(x, y, "dropout_forward");
    copy(stream, x, y);
    return;
  }
  dropout_apply(stream, x, nullptr, y, p, key, "dropout_forward");
}

void dropout_backward(cudaStream_t stream, const Tensor& dy, Tensor& dx, float p, RngKey key) {
  if (p == 0.0f) {
    require_numel(dy, dx, "dropout_backward");
    copy(stream, dy, dx);
    return;
  }
  dropout_apply(stream, dy, nullptr, dx, p, key, "dropout_backward");
}

void dropout_add(cudaStream_t stream, const Tensor& x, const Tensor& residual, Tensor& out, float p,
                 RngKey key) {
  if (p == 0.0f) {
    add(stream, residual, x, out);
    return;
  }
  dropout_apply(stream, x, &residual, out, p, key, "dropout_add");
}

void bias_dropout_add(cudaStream_t stream, const Tensor& x, const Tensor& bias,
                      const Tensor& residual, Tensor& out, float p, RngKey key) {
  dropout_apply(stream, x, &residual, out, p, key, "bias_dropout_add", &bias);
}

}  // namespace megatron::kernels
