// Philox4x32-10 reproduces the published known-answer vectors (Random123's kat_vectors),
// which cuRAND's own implementation also gives (checked with curand_philox4x32_x.h on the host).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tensor/philox.hpp"

namespace megatron::tensor {
namespace philox_test {

using ::testing::ElementsAre;

TEST(Philox, ZeroCounterAndKey) {
  EXPECT_THAT(philox4x32_10({0, 0, 0, 0}, {0, 0}),
              ElementsAre(0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u));
}

TEST(Philox, AllOnesCounterAndKey) {
  EXPECT_THAT(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                            {0xffffffffu, 0xffffffffu}),
              ElementsAre(0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu));
}

TEST(Philox, PiDigitsCounterAndKey) {
  EXPECT_THAT(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                            {0xa4093822u, 0x299f31d0u}),
              ElementsAre(0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u));
}

TEST(Philox, IsUsableAtCompileTime) {
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
}

TEST(Philox, UniformFloatsCoverTheUnitIntervalEvenly) {
  // 40,000 draws in 10 bins: each bin within 5 standard deviations of 4,000.
  int bins[10] = {};
  for (uint32_t i = 0; i < 10000; ++i)
    for (uint32_t word : philox4x32_10({i, 0, 0, 0}, {1234, 0})) {
      const float u = uniform_from_bits(word);
      ASSERT_GE(u, 0.0f);
      ASSERT_LT(u, 1.0f);
      ++bins[static_cast<int>(u * 10)];
    }
  for (int count : bins) EXPECT_NEAR(count, 4000, 5 * 60);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 16777215.0f / 16777216.0f);
}

TEST(Philox, DifferentCountersGiveDifferentWords) {
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < 1000; ++i) seen.insert(philox4x32_10({i, 7, 0, 0}, {42, 0})[0]);
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace philox_test
}  // namespace megatron::tensor
