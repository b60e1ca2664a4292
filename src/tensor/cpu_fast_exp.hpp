// Internal to the CPU backend: the pieces of softmax written so that GCC and Clang vectorise
// them without -ffast-math. glibc's expf is an opaque call that only -ffast-math turns into
// vector code, and a max reduction over floats is not vectorised at all (NaN rules), yet
// softmax (attention, cross-entropy) spends most of its non-GEMM time in these two.
#pragma once

#include <bit>
#include <cstdint>

namespace megatron::tensor::cpu {

// Cephes' single-precision expf: range reduction by ln 2 and a degree-6 polynomial, within 2
// ulp of expf. Branch-free so that loops over it vectorise. Arguments below -87 give exactly 0
// (masked scores, -inf, must contribute nothing); above 88 it saturates at e^88.
inline float fast_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Adding 1.5 * 2^23 rounds x * log2(e) to an integer n held in the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  // ln 2 split in two so that n * 0.693359375 is exact.
  const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t exponent = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  const float two_to_n = std::bit_cast<float>((exponent + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_to_n;
}

// The largest of init and x[0, n): partial maxima in independent lanes, which vectorise as an
// elementwise loop, then combined. Always the same order for the same n: deterministic.
inline float max_of(const float* x, int64_t n, float init) {
  constexpr int kWidth = 16;
  float lanes[kWidth];
  for (int l = 0; l < kWidth; ++l) lanes[l] = init;
  int64_t j = 0;
  for (; j + kWidth <= n; j += kWidth) {
    for (int l = 0; l < kWidth; ++l) lanes[l] = lanes[l] > x[j + l] ? lanes[l] : x[j + l];
  }
  float m = init;
  for (; j < n; ++j) m = m > x[j] ? m : x[j];
  for (int l = 0; l < kWidth; ++l) m = m > lanes[l] ? m : lanes[l];
  return m;
}

}  // namespace megatron::tensor::cpu
