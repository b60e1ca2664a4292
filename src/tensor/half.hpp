// The 16-bit storage types: bfloat16 and IEEE binary16 (f16), converted to and from f32 with
// round-to-nearest-even, as GPUs and PyTorch do. Math is always done in f32.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace megatron::tensor {

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

constexpr float to_float(bf16 v) { return std::bit_cast<float>(uint32_t{v.bits} << 16); }

constexpr bf16 to_bf16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<uint16_t>((x >> 16) | 0x0040u)};  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);  // ties to even
  return {static_cast<uint16_t>((x + rounding) >> 16)};
}

float to_float(f16 v);
f16 to_f16(float value);

// Bulk conversions (the CPU backend's casts). Sizes must match.
void convert(std::span<const float> in, std::span<bf16> out);
void convert(std::span<const bf16> in, std::span<float> out);
void convert(std::span<const float> in, std::span<f16> out);
void convert(std::span<const f16> in, std::span<float> out);

}  // namespace megatron::tensor
