// CpuBackend: elementwise arithmetic, bias add and gradient, GELU, SwiGLU and dropout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"
#include "tensor/cpu_fast_exp.hpp"
#include "tensor/random.hpp"

namespace megatron::tensor {
namespace {

using cpu::Floats;
using cpu::kChunk;

// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, about an f32 ulp of 1), the
// approximation PyTorch's vectorised CPU GELU uses; branch-free so that loops over it vectorise.
inline float erf_approx(float x) {
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  r = r * t;
  return std::copysign(1.0f - r * cpu::fast_exp(-a * a), x);
}

inline float sigmoid(float x) { return 1.0f / (1.0f + cpu::fast_exp(-x)); }

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_approx(x * kInvSqrt2)); }

inline float gelu_erf_grad(float x) {
  return 0.5f * (1.0f + erf_approx(x * kInvSqrt2)) + x * kInvSqrt2Pi * cpu::fast_exp(-0.5f * x * x);
}

// 0.5 x (1 + tanh u) = x sigmoid(2u), which needs one exponential and no tanh.
inline float gelu_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return x * sigmoid(2.0f * u);
}

// d/dx of x sigmoid(2u) = s + 2 x s (1 - s) du/dx, with s = sigmoid(2u).
inline float gelu_tanh_grad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  const float s = sigmoid(2.0f * u);
  return s + 2.0f * x * s * (1.0f - s) * du;
}

// y[i] = f(x[i]) over any float dtypes.
template <typename F>
void map_unary(const Tensor& x, Tensor& y, const char* op, F f) {
  cpu::require_numel(x, y, op);
  const Floats fx = cpu::floats(x, op), fy = cpu::floats(y, op);
  cpu::for_chunks(x.numel(), [&](int64_t begin, int64_t n) {
    float xb[kChunk], yb[kChunk];
    const float* xs = cpu::load_f32(fx, begin, n, xb);
    float* ys = cpu::f32_target(fy, begin, yb);
    for (int64_t i = 0; i < n; ++i) ys[i] = f(xs[i]);
    cpu::store_f32(fy, begin, n, ys);
  });
}

// out[i] = f(a[i], b[i]) over any float dtypes; out may alias a or b.
template <typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, const char* op, F f) {
  cpu::require_numel(a, b, op);
  cpu::require_numel(a, out, op);
  const Floats fa = cpu::floats(a, op), fb = cpu::floats(b, op), fo = cpu::floats(out, op);
  cpu::for_chunks(a.numel(), [&](int64_t begin, int64_t n) {
    float ab[kChunk], bb[kChunk], ob[kChunk];
    const float* as = cpu::load_f32(fa, begin, n, ab);
    const float* bs = cpu::load_f32(fb, begin, n, bb);
    float* os = cpu::f32_target(fo, begin, ob);
    for (int64_t i = 0; i < n; ++i) os[i] = f(as[i], bs[i]);
    cpu::store_f32(fo, begin, n, os);
  });
}

// Rows and columns of x viewed as [n, c] with c its last dimension.
struct Rows {
  int64_t n = 0;
  int64_t c = 0;
};

Rows rows_of(const Tensor& x, const char* op) {
  cpu::require(x.rank() >= 1, op, "expected at least one dimension, got a scalar");
  const int64_t c = x.dim(-1);
  return {c == 0 ? 0 : x.numel() / c, c};
}

// Philox blocks drawn per call of philox_uniforms: 32 elements.
constexpr int64_t kPhiloxLanes = 8;

#if defined(__AVX2__)
// Lane-wise 32 x 32 -> 64-bit product of a and m, split into its high and low words.
inline void mul_hi_lo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

inline __m256 uniforms_from_bits(__m256i bits) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bits, 8)),
                       _mm256_set1_ps(1.0f / 16777216.0f));
}

// Uniforms of elements [4 * first_block, 4 * (first_block + 8)) of key's stream, exactly
// uniform_at's values: philox4x32_10 on eight blocks at once. One block at a time Philox costs
// several times dropout's memory traffic, and the compiler does not vectorise its 64-bit
// products by itself.
void philox_uniforms(RngKey key, uint64_t first_block, float* u) {
  // Counters of blocks first_block + 0..7: the low words, and the high words plus the carry of
  // lanes whose low word wrapped (an unsigned low < lane, compared as signed after flipping the
  // sign bits).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  __m256i c0 = _mm256_add_epi32(
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first_block))), lane);
  const __m256i wrapped =
      _mm256_cmpgt_epi32(_mm256_xor_si256(lane, sign), _mm256_xor_si256(c0, sign));
  __m256i c1 = _mm256_sub_epi32(
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first_block >> 32))), wrapped);
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream)));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key.stream >> 32)));
  const __m256i mul0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i mul1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mul_hi_lo(c0, mul0, hi0, lo0);
    mul_hi_lo(c2, mul1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Word w of block l belongs to element 4 l + w: transpose the 4 x 8 words into that order.
  const __m256 w0 = uniforms_from_bits(c0), w1 = uniforms_from_bits(c1);
  const __m256 w2 = uniforms_from_bits(c2), w3 = uniforms_from_bits(c3);
  const __m256 t0 = _mm256_unpacklo_ps(w0, w1), t1 = _mm256_unpackhi_ps(w0, w1);
  const __m256 t2 = _mm256_unpacklo_ps(w2, w3), t3 = _mm256_unpackhi_ps(w2, w3);
  const __m256 b04 = _mm256_shuffle_ps(t0, t2, 0x44), b15 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 b26 = _mm256_shuffle_ps(t1, t3, 0x44), b37 = _mm256_shuffle_ps(t1, t3, 0xEE);
  _mm256_storeu_ps(u + 0, _mm256_permute2f128_ps(b04, b15, 0x20));
  _mm256_storeu_ps(u + 8, _mm256_permute2f128_ps(b26, b37, 0x20));
  _mm256_storeu_ps(u + 16, _mm256_permute2f128_ps(b04, b15, 0x31));
  _mm256_storeu_ps(u + 24, _mm256_permute2f128_ps(b26, b37, 0x31));
}
#else
void philox_uniforms(RngKey key, uint64_t first_block, float* u) {
  for (int64_t l = 0; l < kPhiloxLanes; ++l) {
    const auto words = philox_block(key, first_block + static_cast<uint64_t>(l));
    for (int w = 0; w < 4; ++w) u[4 * l + w] = uniform_from_bits(words[static_cast<size_t>(w)]);
  }
}
#endif

static_assert(kChunk % (4 * kPhiloxLanes) == 0, "dropout chunks must hold whole Philox groups");

// Dropout multipliers of elements [begin, begin + n): 1 / (1 - p) where kept, else 0.
// begin is a multiple of kChunk, so of 4 * kPhiloxLanes; the key's offset moves the numbering.
void dropout_multipliers(RngKey key, float p, int64_t begin, int64_t n, float* mult) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const uint64_t first = key.offset + static_cast<uint64_t>(begin);
  if (first % 4 == 0) {
    for (int64_t i = 0; i < n; i += 4 * kPhiloxLanes) {
      philox_uniforms(key, first / 4 + static_cast<uint64_t>(i / 4), mult + i);
    }
  } else {
    // An offset that splits Philox blocks (rare: shards of an odd hidden size) draws one by one.
    for (int64_t i = 0; i < n; ++i) mult[i] = uniform_at(key, first + static_cast<uint64_t>(i));
  }
  for (int64_t i = 0; i < n; ++i) mult[i] = mult[i] >= p ? scale : 0.0f;
}

void check_dropout_p(float p, const char* op) {
  cpu::require(p >= 0.0f && p <= 1.0f, op, "dropout probability " + std::to_string(p));
}

// y = dropout(x) (+ residual when given). A dropped element is exactly zero even where x is
// not finite, as the mask is applied by selection.
void dropout_apply(const Tensor& x, const Tensor* residual, Tensor& y, float p, RngKey key,
                   const char* op) {
  check_dropout_p(p, op);
  cpu::require_numel(x, y, op);
  if (residual) cpu::require_numel(x, *residual, op);
  const Floats fx = cpu::floats(x, op), fy = cpu::floats(y, op);
  const Floats fr = residual ? cpu::floats(*residual, op) : Floats{};
  cpu::for_chunks(x.numel(), [&](int64_t begin, int64_t n) {
    // Whole Philox groups are drawn, so a short last chunk still needs the full kChunk.
    alignas(64) float mult[kChunk];
    float xb[kChunk], yb[kChunk], rb[kChunk];
    dropout_multipliers(key, p, begin, n, mult);
    const float* xs = cpu::load_f32(fx, begin, n, xb);
    float* ys = cpu::f32_target(fy, begin, yb);
    if (residual) {
      const float* rs = cpu::load_f32(fr, begin, n, rb);
      for (int64_t i = 0; i < n; ++i) ys[i] = rs[i] + (mult[i] != 0.0f ? xs[i] * mult[i] : 0.0f);
    } else {
      for (int64_t i = 0; i < n; ++i) ys[i] = mult[i] != 0.0f ? xs[i] * mult[i] : 0.0f;
    }
    cpu::store_f32(fy, begin, n, ys);
  });
}

}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  map_binary(a, b, out, "add", [](float x, float y) { return x + y; });
}

void CpuBackend::axpy(float alpha, const Tensor& x, Tensor& y) {
  map_binary(x, y, y, "axpy", [alpha](float xi, float yi) { return yi + alpha * xi; });
}

void CpuBackend::scale(Tensor& x, float alpha) {
  map_unary(x, x, "scale", [alpha](float v) { return v * alpha; });
}

void CpuBackend::bias_add(Tensor& x, const Tensor& bias) {
  const Rows r = rows_of(x, "bias_add");
  cpu::require(bias.numel() == r.c, "bias_add",
               "bias " + to_string(bias.shape()) + " for rows of " + to_string(x.shape()));
  const Floats fx = cpu::floats(x, "bias_add"), fb = cpu::floats(bias, "bias_add");
  std::vector<float> bias_buffer(static_cast<size_t>(r.c));
  const float* b = cpu::load_f32(fb, 0, r.c, bias_buffer.data());
  // Rows are split into chunks as well, so that one long row still stages through L1.
  const int64_t pieces = (r.c + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (x.numel() >= cpu::kParallelMin)
  for (int64_t k = 0; k < r.n * pieces; ++k) {
    const int64_t row = k / pieces, col = (k % pieces) * kChunk;
    const int64_t n = std::min(kChunk, r.c - col), begin = row * r.c + col;
    float xb[kChunk], yb[kChunk];
    const float* xs = cpu::load_f32(fx, begin, n, xb);
    float* ys = cpu::f32_target(fx, begin, yb);
    for (int64_t j = 0; j < n; ++j) ys[j] = xs[j] + b[col + j];
    cpu::store_f32(fx, begin, n, ys);
  }
}

void CpuBackend::bias_grad(const Tensor& dy, Tensor& dbias) {
  const Rows r = rows_of(dy, "bias_grad");
  cpu::require(dbias.dtype() == DType::F32 && dbias.numel() == r.c, "bias_grad",
               "dbias must be f32 with " + std::to_string(r.c) + " elements, got " +
                   std::string(name(dbias.dtype())) + " " + to_string(dbias.shape()));
  const Floats fdy = cpu::floats(dy, "bias_grad");
  float* out = dbias.data<float>();
  const cpu::RowBlocks blocks = cpu::row_blocks(r.n);
  if (blocks.count == 0 || r.c == 0) return;
  float* partial = cpu::thread_scratch(static_cast<size_t>(blocks.count * r.c));
#pragma omp parallel if (dy.numel() >= cpu::kParallelMin)
  {
    std::vector<float> row_buffer(dy.dtype() == DType::F32 ? 0 : static_cast<size_t>(r.c));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks.count; ++b) {
      float* sum = partial + b * r.c;
      std::fill(sum, sum + r.c, 0.0f);
      const int64_t end = std::min(r.n, (b + 1) * blocks.rows);
      for (int64_t row = b * blocks.rows; row < end; ++row) {
        const float* g = cpu::load_f32(fdy, row * r.c, r.c, row_buffer.data());
        for (int64_t j = 0; j < r.c; ++j) sum[j] += g[j];
      }
    }
  }
  cpu::add_partials(partial, blocks.count, r.c, out);
}

void CpuBackend::gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  if (tanh_approx) {
    map_unary(x, y, "gelu_forward", [](float v) { return gelu_tanh(v); });
  } else {
    map_unary(x, y, "gelu_forward", [](float v) { return gelu_erf(v); });
  }
}

void CpuBackend::gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, bool tanh_approx) {
  if (tanh_approx) {
    map_binary(dy, x, dx, "gelu_backward", [](float g, float v) { return g * gelu_tanh_grad(v); });
  } else {
    map_binary(dy, x, dx, "gelu_backward", [](float g, float v) { return g * gelu_erf_grad(v); });
  }
}

namespace {

// The gated units' gates: value and derivative.
struct SiluGate {
  static float value(float a) { return a * sigmoid(a); }
  // d silu(a)/da = s (1 + a (1 - s)) with s = sigmoid(a).
  static void grads(float dy, float a, float u, float& dgate, float& dup) {
    const float s = sigmoid(a);
    dgate = dy * u * s * (1.0f + a * (1.0f - s));
    dup = dy * a * s;
  }
};
struct GeluTanhGate {
  static float value(float a) { return gelu_tanh(a); }
  static void grads(float dy, float a, float u, float& dgate, float& dup) {
    dgate = dy * u * gelu_tanh_grad(a);
    dup = dy * gelu_tanh(a);
  }
};

// y [.., f] = gate(x[.., :f]) * x[.., f:]
template <class Gate>
void glu_forward(const Tensor& x, Tensor& y, const char* op) {
  const Rows r = rows_of(y, op);
  cpu::require(x.rank() >= 1 && x.dim(-1) == 2 * r.c && x.numel() == 2 * y.numel(), op,
               "x " + to_string(x.shape()) + " must be [.., 2f] for y " + to_string(y.shape()));
  const Floats fx = cpu::floats(x, op), fy = cpu::floats(y, op);
  const int64_t f = r.c, pieces = (f + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (x.numel() >= cpu::kParallelMin)
  for (int64_t k = 0; k < r.n * pieces; ++k) {
    const int64_t row = k / pieces, col = (k % pieces) * kChunk, n = std::min(kChunk, f - col);
    float gb[kChunk], ub[kChunk], yb[kChunk];
    const float* gate = cpu::load_f32(fx, row * 2 * f + col, n, gb);
    const float* up = cpu::load_f32(fx, row * 2 * f + f + col, n, ub);
    float* ys = cpu::f32_target(fy, row * f + col, yb);
    for (int64_t j = 0; j < n; ++j) ys[j] = Gate::value(gate[j]) * up[j];
    cpu::store_f32(fy, row * f + col, n, ys);
  }
}

template <class Gate>
void glu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, const char* op) {
  const Rows r = rows_of(dy, op);
  cpu::require(x.rank() >= 1 && x.dim(-1) == 2 * r.c && x.numel() == 2 * dy.numel(), op,
               "x " + to_string(x.shape()) + " must be [.., 2f] for dy " + to_string(dy.shape()));
  cpu::require_numel(x, dx, op);
  const Floats fdy = cpu::floats(dy, op), fx = cpu::floats(x, op), fdx = cpu::floats(dx, op);
  const int64_t f = r.c, pieces = (f + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (x.numel() >= cpu::kParallelMin)
  for (int64_t k = 0; k < r.n * pieces; ++k) {
    const int64_t row = k / pieces, col = (k % pieces) * kChunk, n = std::min(kChunk, f - col);
    const int64_t gate_at = row * 2 * f + col, up_at = gate_at + f;
    float gb[kChunk], ub[kChunk], db[kChunk], dgb[kChunk], dub[kChunk];
    const float* gate = cpu::load_f32(fx, gate_at, n, gb);
    const float* up = cpu::load_f32(fx, up_at, n, ub);
    const float* g = cpu::load_f32(fdy, row * f + col, n, db);
    float* dgate = cpu::f32_target(fdx, gate_at, dgb);
    float* dup = cpu::f32_target(fdx, up_at, dub);
    for (int64_t j = 0; j < n; ++j) Gate::grads(g[j], gate[j], up[j], dgate[j], dup[j]);
    cpu::store_f32(fdx, gate_at, n, dgate);
    cpu::store_f32(fdx, up_at, n, dup);
  }
}

}  // namespace

void CpuBackend::swiglu_forward(const Tensor& x, Tensor& y) {
  glu_forward<SiluGate>(x, y, "swiglu_forward");
}

void CpuBackend::swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  glu_backward<SiluGate>(dy, x, dx, "swiglu_backward");
}

void CpuBackend::geglu_forward(const Tensor& x, Tensor& y) {
  glu_forward<GeluTanhGate>(x, y, "geglu_forward");
}

void CpuBackend::geglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  glu_backward<GeluTanhGate>(dy, x, dx, "geglu_backward");
}

void CpuBackend::dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) {
  if (p == 0.0f) {
    cpu::require_numel(x, y, "dropout_forward");
    copy(x, y);
    return;
  }
  dropout_apply(x, nullptr, y, p, key, "dropout_forward");
}

void CpuBackend::dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) {
  if (p == 0.0f) {
    cpu::require_numel(dy, dx, "dropout_backward");
    copy(dy, dx);
    return;
  }
  dropout_apply(dy, nullptr, dx, p, key, "dropout_backward");
}

void CpuBackend::dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                             RngKey key) {
  if (p == 0.0f) {
    add(residual, x, out);
    return;
  }
  dropout_apply(x, &residual, out, p, key, "dropout_add");
}

}  // namespace megatron::tensor
