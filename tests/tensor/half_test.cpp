// bf16 and f16 conversions round to nearest even and handle every special value. f16 is
// checked against the processor's own F16C conversion instructions where the CPU has them.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <random>

#include "tensor/half.hpp"

namespace megatron::tensor {
namespace half_test {

__attribute__((target("f16c"))) uint16_t hardware_to_f16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hardware_from_f16(uint16_t h) { return _cvtsh_ss(h); }

bool has_f16c() { return __builtin_cpu_supports("f16c"); }

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

TEST(F16, EveryBitPatternWidensLikeTheHardware) {
  if (!has_f16c()) GTEST_SKIP() << "this CPU has no F16C instructions to compare with";
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float ours = to_float(f16{h}), hw = hardware_from_f16(h);
    if (std::isnan(hw))
      ASSERT_TRUE(std::isnan(ours)) << bits;
    else
      ASSERT_TRUE(same_bits(ours, hw)) << bits;
  }
}

TEST(F16, EveryBitPatternSurvivesARoundTrip) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const f16 h{static_cast<uint16_t>(bits)};
    if (std::isnan(to_float(h))) continue;
    ASSERT_EQ(to_f16(to_float(h)).bits, h.bits) << bits;
  }
}

TEST(F16, NarrowingMatchesTheHardwareOnRandomAndEdgeValues) {
  if (!has_f16c()) GTEST_SKIP() << "this CPU has no F16C instructions to compare with";
  std::mt19937 rng(7);
  std::vector<float> values{0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f,
                            std::numeric_limits<float>::infinity(), 5.9604645e-8f, 2.9802322e-8f,
                            2.9802326e-8f, 6.097555e-5f, 6.1035156e-5f, 1.0f + 1.0f / 2048,
                            1.0f + 3.0f / 2048, std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 200000; ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float v : values) {
    if (std::isnan(v)) continue;
    ASSERT_EQ(to_f16(v).bits, hardware_to_f16(v)) << v;
  }
}

TEST(F16, NanStaysNanAndKeepsItsSign) {
  const f16 h = to_f16(-std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(to_float(h)));
  EXPECT_TRUE(std::signbit(to_float(h)));
}

TEST(Bf16, EveryBitPatternSurvivesARoundTrip) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const bf16 b{static_cast<uint16_t>(bits)};
    if (std::isnan(to_float(b))) continue;
    ASSERT_EQ(to_bf16(to_float(b)).bits, b.bits) << bits;
  }
}

TEST(Bf16, TiesRoundToEven) {
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(to_float(to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(to_float(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(to_float(to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
}

TEST(Bf16, RandomFloatsGoToTheNearestBf16) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isfinite(x) || std::abs(x) > 3.38e38f) continue;
    const bf16 b = to_bf16(x);
    const double err = std::abs(double(to_float(b)) - x);
    // Neither neighbour is closer.
    for (int d : {-1, 1}) {
      const bf16 n{static_cast<uint16_t>(b.bits + d)};
      if (std::isfinite(to_float(n))) ASSERT_LE(err, std::abs(double(to_float(n)) - x)) << x;
    }
  }
}

TEST(Bf16, NanStaysNanAndInfinityStaysInfinity) {
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::bit_cast<float>(0x7F800001u)))));  // signalling
  EXPECT_EQ(to_float(to_bf16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
}

TEST(Conversions, BulkConversionsMatchTheScalarOnes) {
  const std::vector<float> in{0.1f, -2.5f, 1e-6f, 70000.0f};
  std::vector<bf16> b(in.size());
  std::vector<f16> h(in.size());
  std::vector<float> back(in.size());
  convert(in, std::span<bf16>(b));
  convert(in, std::span<f16>(h));
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(b[i].bits, to_bf16(in[i]).bits);
    EXPECT_EQ(h[i].bits, to_f16(in[i]).bits);
  }
  convert(std::span<const f16>(h), std::span<float>(back));
  EXPECT_EQ(back[3], std::numeric_limits<float>::infinity());
}

}  // namespace half_test
}  // namespace megatron::tensor
