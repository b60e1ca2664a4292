// The CUDA backend's normal initialisation (Box-Muller on Philox, as tensor::normal_at) and the
// AdamW and SGD parameter updates, with tensor/cpu_optimizer.cpp's arithmetic.
#include <cuda_runtime.h>

#include <cmath>
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

// --- normal --------------------------------------------------------------------------------------

// The four standard normals of Philox block `block`, exactly normal_at's arithmetic: Box-Muller
// on the word pairs (0, 1) and (2, 3), cosine to the first of a pair, sine to the second. The
// CUDA library's logf, sqrtf, sinf and cosf (the precise ones, not the fast intrinsics) are
// within an ulp or two of glibc's, so a value may differ from the CPU's in its last bits.
__device__ __forceinline__ void normals4(const RngKey& key, uint64_t block, float* z) {
  const auto words = tensor::philox_block(key, block);
#pragma unroll
  for (int pair = 0; pair < 2; ++pair) {
    const float u1 = 1.0f - tensor::uniform_from_bits(words[2 * pair]);  // (0, 1]: log finite
    const float u2 = tensor::uniform_from_bits(words[2 * pair + 1]);
    const float radius = sqrtf(-2.0f * logf(u1));
    const float angle = 6.2831853071795864f * u2;
    float s, c;
    sincosf(angle, &s, &c);
    z[2 * pair] = radius * c;
    z[2 * pair + 1] = radius * s;
  }
}

// x[i] = mean + std * normal(key, key.offset + i). A group of 8 elements takes the normals of
// Philox blocks base / 4 .. base / 4 + 2 shifted by base % 4, which is the key's offset modulo 4
// in every thread: the third block is drawn only for an offset that splits blocks.
__global__ void normal_kernel(Floats x, int64_t n, bool vec, float mean, float std, RngKey key) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t e = g * kVec;
    const uint64_t base = key.offset + uint64_t(e), block = base / 4;
    const unsigned shift = unsigned(base % 4);
    float z[12];
    normals4(key, block, z);
    normals4(key, block + 1, z + 4);
    if (shift != 0) {
      normals4(key, block + 2, z + 8);
    } else {
#pragma unroll
      for (int k = 8; k < 12; ++k) z[k] = 0.0f;
    }
    if (shift & 1u) {
#pragma unroll
      for (int k = 0; k < 11; ++k) z[k] = z[k + 1];
    }
    if (shift & 2u) {
#pragma unroll
      for (int k = 0; k < 10; ++k) z[k] = z[k + 2];
    }
    float v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = mean + std * z[k];
    write8(x, e, vec, v);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) {
    const uint64_t index = key.offset + uint64_t(i);
    float z[4];
    normals4(key, index / 4, z);
    const unsigned w = unsigned(index % 4);
    write(x, i, mean + std * (w == 0 ? z[0] : w == 1 ? z[1] : w == 2 ? z[2] : z[3]));
  }
}

// --- AdamW and SGD -------------------------------------------------------------------------------

// The CPU's AdamWCoefficients, computed on the host the same way.
struct AdamW {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale, step_size, bias2_sqrt,
      decay;
};

// torch.optim.AdamW's arithmetic in the CPU's order (adamw_element in cpu_optimizer.cpp). The
// GPU fuses multiply-adds, so results may differ from the CPU's in the last bit.
__device__ __forceinline__ void adamw_element(const AdamW& k, float g, float& w, float& m,
                                              float& v) {
  const float gi = g * k.grad_scale;
  m = k.beta1 * m + k.one_minus_beta1 * gi;
  v = k.beta2 * v + k.one_minus_beta2 * gi * gi;
  w = w * k.decay - k.step_size * (m / (sqrtf(v) / k.bias2_sqrt + k.eps));
}

__global__ void adamw_kernel(float* w, Floats grad, float* m, float* v, int64_t n, bool vec,
                             AdamW k) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t e = g * kVec;
    float gv[kVec], wv[kVec], mv[kVec], vv[kVec];
    read8(grad, e, vec, gv);
    load_raw8(w, e, vec, wv);
    load_raw8(m, e, vec, mv);
    load_raw8(v, e, vec, vv);
#pragma unroll
    for (int j = 0; j < kVec; ++j) adamw_element(k, gv[j], wv[j], mv[j], vv[j]);
    store_raw8(w, e, vec, wv);
    store_raw8(m, e, vec, mv);
    store_raw8(v, e, vec, vv);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) adamw_element(k, read(grad, i), w[i], m[i], v[i]);
}

// The CPU's sgd_run: with a buffer (momentum != 0) b = momentum b + g grad_scale and the step is
// lr b; without one (buf null) the step is lr g grad_scale.
__device__ __forceinline__ void sgd_element(float g, float& w, float* b, float lr, float momentum,
                                            float decay, float grad_scale) {
  if (b) {
    const float next = momentum * *b + g * grad_scale;
    w = w * decay - lr * next;
    *b = next;
  } else {
    w = w * decay - lr * (g * grad_scale);
  }
}

__global__ void sgd_kernel(float* w, Floats grad, float* buf, int64_t n, bool vec, float lr,
                           float momentum, float decay, float grad_scale) {
  const int64_t groups = n / kVec, first = thread_index(), stride = thread_count();
  for (int64_t g = first; g < groups; g += stride) {
    const int64_t e = g * kVec;
    float gv[kVec], wv[kVec], bv[kVec];
    read8(grad, e, vec, gv);
    load_raw8(w, e, vec, wv);
    if (buf) load_raw8(buf, e, vec, bv);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      sgd_element(gv[j], wv[j], buf ? &bv[j] : nullptr, lr, momentum, decay, grad_scale);
    }
    store_raw8(w, e, vec, wv);
    if (buf) store_raw8(buf, e, vec, bv);
  }
  const int64_t i = groups * kVec + first;
  if (i < n) {
    sgd_element(read(grad, i), w[i], buf ? buf + i : nullptr, lr, momentum, decay, grad_scale);
  }
}

// An f32 state tensor of master's size (the CPU's f32_state).
float* f32_state(const Tensor& t, const Tensor& master, const char* op, const char* what) {
  require_device(t, op);
  require(t.dtype() == tensor::DType::F32, op,
          std::string(what) + " must be f32, got " + std::string(tensor::name(t.dtype())));
  require_numel(master, t, op);
  return static_cast<float*>(t.raw());
}

}  // namespace

void normal(cudaStream_t stream, Tensor& x, float mean, float std, RngKey key) {
  const char* op = "normal";
  require_float(x, op);
  const int64_t n = x.numel();
  if (n == 0) return;
  normal_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(floats(x), n, aligned16(x.raw()), mean,
                                                          std, key);
  check_launch(op);
}

void adamw_update(cudaStream_t stream, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWStep& step) {
  const char* op = "adamw_update";
  require(step.step >= 1, op, "step is 1-based, got " + std::to_string(step.step));
  float* w = f32_state(master, master, op, "master");
  float* ms = f32_state(m, master, op, "m");
  float* vs = f32_state(v, master, op, "v");
  require_numel(master, grad, op);
  require_float(grad, op);
  // As the CPU: bias corrections in f64, folded into a step size and a divisor of sqrt(v).
  const double bias1 = 1.0 - std::pow(double{step.beta1}, double(step.step));
  const double bias2 = 1.0 - std::pow(double{step.beta2}, double(step.step));
  const AdamW k{.beta1 = step.beta1,
                .beta2 = step.beta2,
                .one_minus_beta1 = 1.0f - step.beta1,
                .one_minus_beta2 = 1.0f - step.beta2,
                .eps = step.eps,
                .grad_scale = step.grad_scale,
                .step_size = static_cast<float>(double{step.lr} / bias1),
                .bias2_sqrt = static_cast<float>(std::sqrt(bias2)),
                .decay = 1.0f - step.lr * step.weight_decay};
  const int64_t n = master.numel();
  if (n == 0) return;
  const bool vec = aligned16(w) && aligned16(ms) && aligned16(vs) && aligned16(grad.raw());
  adamw_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(w, floats(grad), ms, vs, n, vec, k);
  check_launch(op);
}

void sgd_update(cudaStream_t stream, Tensor& master, const Tensor& grad, Tensor& momentum,
                const SgdStep& step) {
  const char* op = "sgd_update";
  float* w = f32_state(master, master, op, "master");
  require_numel(master, grad, op);
  require_float(grad, op);
  // With momentum 0 the buffer is neither needed nor touched (it may be an empty Tensor).
  const bool use_buffer = step.momentum != 0.0f;
  float* buf = use_buffer ? f32_state(momentum, master, op, "momentum") : nullptr;
  const float decay = 1.0f - step.lr * step.weight_decay;
  const int64_t n = master.numel();
  if (n == 0) return;
  const bool vec = aligned16(w) && aligned16(grad.raw()) && (!buf || aligned16(buf));
  sgd_kernel<<<grid_for_vec(n), kThreads, 0, stream>>>(w, floats(grad), buf, n, vec, step.lr,
                                                       step.momentum, decay, step.grad_scale);
  check_launch(op);
}

}  // namespace megatron::kernels
