#include "tensor/half.hpp"

#include <cassert>
#include <cmath>

namespace megatron::tensor {

float to_float(f16 v) {
  const uint32_t sign = uint32_t{v.bits & 0x8000u} << 16;
  const uint32_t exponent = (v.bits >> 10) & 0x1Fu;
  const uint32_t mantissa = v.bits & 0x3FFu;
  if (exponent == 0x1F)  // inf or NaN (NaN payload kept, made quiet)
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u));
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in f32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

f16 to_f16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: keep the top payload bits, force quiet
    return {static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu))};
  if (magnitude >= 0x477FF000u)  // rounds to 65520 or more: infinity
    return {static_cast<uint16_t>(sign | 0x7C00u)};
  if (magnitude < 0x38800000u) {
    // Below the smallest normal f16 (2^-14): a subnormal, rounded to a multiple of 2^-24.
    // Adding 0.5 (exponent -1) shifts the mantissa into place and the FPU rounds to even.
    const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return {static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(shifted) - 0x3F000000u))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even.
  const uint32_t rounding = 0xFFFu + ((magnitude >> 13) & 1u);
  return {static_cast<uint16_t>(sign | ((magnitude - 0x38000000u + rounding) >> 13))};
}

void convert(std::span<const float> in, std::span<bf16> out) {
  assert(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_bf16(in[i]);
}
void convert(std::span<const bf16> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_float(in[i]);
}
void convert(std::span<const float> in, std::span<f16> out) {
  assert(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_f16(in[i]);
}
void convert(std::span<const f16> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_float(in[i]);
}

}  // namespace megatron::tensor
