// CpuBackend: normal initialisation and the AdamW and SGD parameter updates.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace {

using cpu::Floats;
using cpu::kChunk;

float* f32_state(const Tensor& t, const Tensor& master, const char* op, const char* what) {
  cpu::require(t.dtype() == DType::F32, op,
               std::string(what) + " must be f32, got " + std::string(name(t.dtype())));
  cpu::require_numel(master, t, op);
  return t.data<float>();
}

struct AdamWCoefficients {
  float beta1, beta2, eps, grad_scale, step_size, bias2_sqrt, decay;
};

inline void adamw_element(const AdamWCoefficients& k, float g, float& w, float& m, float& v) {
  const float gi = g * k.grad_scale;
  m = k.beta1 * m + (1.0f - k.beta1) * gi;
  v = k.beta2 * v + (1.0f - k.beta2) * gi * gi;
  w = w * k.decay - k.step_size * (m / (std::sqrt(v) / k.bias2_sqrt + k.eps));
}

// n elements of AdamW. std::sqrt keeps an errno branch (there is no -ffast-math), which stops
// the compiler vectorising the loop and makes it three times slower; with AVX the same
// arithmetic runs eight lanes at a time on vector types, the tail element by element.
void adamw_run(const AdamWCoefficients& k, const float* g, float* w, float* m, float* v,
               int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  const __m256 beta1 = _mm256_set1_ps(k.beta1), beta2 = _mm256_set1_ps(k.beta2);
  const __m256 one_minus_beta1 = _mm256_set1_ps(1.0f - k.beta1);
  const __m256 one_minus_beta2 = _mm256_set1_ps(1.0f - k.beta2);
  const __m256 eps = _mm256_set1_ps(k.eps), grad_scale = _mm256_set1_ps(k.grad_scale);
  const __m256 step_size = _mm256_set1_ps(k.step_size), decay = _mm256_set1_ps(k.decay);
  const __m256 bias2_sqrt = _mm256_set1_ps(k.bias2_sqrt);
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i) * grad_scale;
    const __m256 mi = beta1 * _mm256_loadu_ps(m + i) + one_minus_beta1 * gi;
    const __m256 vi = beta2 * _mm256_loadu_ps(v + i) + one_minus_beta2 * gi * gi;
    const __m256 denom = _mm256_sqrt_ps(vi) / bias2_sqrt + eps;
    _mm256_storeu_ps(w + i, _mm256_loadu_ps(w + i) * decay - step_size * (mi / denom));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
  }
#endif
  for (; i < n; ++i) adamw_element(k, g[i], w[i], m[i], v[i]);
}

// n elements of SGD; without a momentum buffer (momentum 0) the step is lr g.
void sgd_run(const float* g, float* w, float* buf, int64_t n, float lr, float momentum, float decay,
             float grad_scale) {
  if (buf) {
    for (int64_t i = 0; i < n; ++i) {
      const float b = momentum * buf[i] + g[i] * grad_scale;
      w[i] = w[i] * decay - lr * b;
      buf[i] = b;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) w[i] = w[i] * decay - lr * (g[i] * grad_scale);
  }
}

}  // namespace

// Philox is drawn once per block of four elements and Box-Muller once per pair, with exactly
// normal_at's arithmetic, so every element equals normal_at(key, i).
void CpuBackend::normal(Tensor& x, float mean, float std, RngKey key) {
  static_assert(kChunk % 4 == 0, "chunks must hold whole Philox blocks");
  const Floats fx = cpu::floats(x, "normal");
  cpu::for_chunks(x.numel(), [&](int64_t begin, int64_t n) {
    float buffer[kChunk];
    float* out = cpu::f32_target(fx, begin, buffer);
    // Elements [first, first + n) of the key's numbering: whole Philox blocks are drawn and the
    // elements outside the range (a shard that starts or ends mid-block) dropped.
    const uint64_t first = key.offset + static_cast<uint64_t>(begin);
    const uint64_t end = first + static_cast<uint64_t>(n);
    for (uint64_t block = first / 4; block * 4 < end; ++block) {
      const auto words = philox_block(key, block);
      float z[4];
      for (int pair = 0; pair < 2; ++pair) {
        const float u1 = 1.0f - uniform_from_bits(words[2 * pair]);
        const float u2 = uniform_from_bits(words[2 * pair + 1]);
        const float radius = std::sqrt(-2.0f * std::log(u1));
        const float angle = 6.2831853071795864f * u2;
        z[2 * pair] = radius * std::cos(angle);
        z[2 * pair + 1] = radius * std::sin(angle);
      }
      for (uint64_t g = std::max(block * 4, first); g < std::min(block * 4 + 4, end); ++g) {
        out[g - first] = mean + std * z[g % 4];
      }
    }
    cpu::store_f32(fx, begin, n, out);
  });
}

// torch.optim.AdamW's arithmetic: the bias corrections are folded into a step size and a
// divisor of sqrt(v) as torch does, which equals lr * mhat / (sqrt(vhat) + eps).
void CpuBackend::adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                              const AdamWStep& step) {
  const char* op = "adamw_update";
  cpu::require(step.step >= 1, op, "step is 1-based, got " + std::to_string(step.step));
  float* w = f32_state(master, master, op, "master");
  float* ms = f32_state(m, master, op, "m");
  float* vs = f32_state(v, master, op, "v");
  cpu::require_numel(master, grad, op);
  const Floats fg = cpu::floats(grad, op);
  const double bias1 = 1.0 - std::pow(double{step.beta1}, double(step.step));
  const double bias2 = 1.0 - std::pow(double{step.beta2}, double(step.step));
  const AdamWCoefficients k{.beta1 = step.beta1,
                            .beta2 = step.beta2,
                            .eps = step.eps,
                            .grad_scale = step.grad_scale,
                            .step_size = static_cast<float>(double{step.lr} / bias1),
                            .bias2_sqrt = static_cast<float>(std::sqrt(bias2)),
                            .decay = 1.0f - step.lr * step.weight_decay};
  cpu::for_chunks(master.numel(), [&](int64_t begin, int64_t n) {
    float buffer[kChunk];
    const float* g = cpu::load_f32(fg, begin, n, buffer);
    adamw_run(k, g, w + begin, ms + begin, vs + begin, n);
  });
}

// torch.optim.SGD with dampening 0 and no Nesterov, the buffer starting at zero (so the first
// step sets it to g, as torch does), and weight decay decoupled as in AdamW. With momentum 0
// the buffer is neither needed nor touched.
void CpuBackend::sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum,
                            const SgdStep& step) {
  const char* op = "sgd_update";
  float* w = f32_state(master, master, op, "master");
  cpu::require_numel(master, grad, op);
  const Floats fg = cpu::floats(grad, op);
  const bool use_buffer = step.momentum != 0.0f;
  float* buf = use_buffer ? f32_state(momentum, master, op, "momentum") : nullptr;
  const float decay = 1.0f - step.lr * step.weight_decay;
  const float lr = step.lr, mu = step.momentum, scale = step.grad_scale;
  cpu::for_chunks(master.numel(), [&](int64_t begin, int64_t n) {
    float buffer[kChunk];
    const float* g = cpu::load_f32(fg, begin, n, buffer);
    sgd_run(g, w + begin, use_buffer ? buf + begin : nullptr, n, lr, mu, decay, scale);
  });
}

}  // namespace megatron::tensor
