// NumpyRandomState::geometric against NumPy's legacy RandomState.geometric (golden values from
// numpy 1.24's RandomState; the legacy stream is frozen, so any NumPy version gives them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "data/numpy_random.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAreArray;

std::vector<int64_t> draws(uint32_t seed, double p, int n) {
  NumpyRandomState random(seed);
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(random.geometric(p));
  return out;
}

TEST(NumpyGeometric, InvertsBelowOneThirdAsNumpyDoes) {
  // numpy: r = RandomState(5); [r.geometric(0.2) for _ in range(12)] (T5's span lengths)
  EXPECT_THAT(draws(5, 0.2, 12), ElementsAreArray({2, 10, 2, 12, 4, 5, 7, 4, 2, 1, 1, 7}));
  EXPECT_THAT(draws(1234, 0.2, 12), ElementsAreArray({1, 5, 3, 7, 7, 2, 2, 8, 15, 10, 2, 4}));
  EXPECT_THAT(draws(42, 0.05, 12),
              ElementsAreArray({10, 59, 26, 18, 4, 4, 2, 40, 18, 25, 1, 69}));
}

TEST(NumpyGeometric, SearchesFromOneAtOrAboveOneThirdAsNumpyDoes) {
  EXPECT_THAT(draws(7, 0.5, 12), ElementsAreArray({1, 3, 1, 2, 6, 2, 2, 1, 1, 1, 2, 3}));
  EXPECT_THAT(draws(3, 1.0, 4), ElementsAreArray({1, 1, 1, 1}));
}

TEST(NumpyGeometric, TakesOneDoubleFromTheStreamPerDraw) {
  // numpy: r = RandomState(9); three geometric(0.2), then random_sample() = 0.13382952895927658
  NumpyRandomState random(9);
  EXPECT_THAT(std::vector<int64_t>({random.geometric(0.2), random.geometric(0.2), random.geometric(0.2)}),
              ElementsAreArray({1, 4, 4}));
  EXPECT_DOUBLE_EQ(random.random(), 0.13382952895927658);
}

TEST(NumpyGeometric, RefusesAProbabilityOutsideZeroToOne) {
  NumpyRandomState random(1);
  EXPECT_THROW(random.geometric(0.0), std::invalid_argument);
  EXPECT_THROW(random.geometric(1.5), std::invalid_argument);
}

}  // namespace
}  // namespace megatron::data
