// Rate grids: measured points come back exactly, sizes between them get the geometric mean in
// octaves, sizes beyond the grid keep the edge's rate, and malformed grids are refused.
#include "plan/rate_grid.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "support/user_error.hpp"

namespace megatron::plan {
namespace rate_grid_test {

using ::testing::HasSubstr;
using test_support::user_error_of;

RateGrid gemm_grid() {
  RateGrid grid;
  grid.axes = {{64, 256}, {64, 256}, {64, 256}};
  // Rates rise with every dimension: 1, 2, 4, 8, ... (row-major, k fastest).
  for (int i = 0; i < 8; ++i) grid.rates.push_back(std::pow(2.0, i));
  return grid;
}

double at(const RateGrid& grid, double m, double n, double k) {
  const std::array<double, 3> point{m, n, k};
  return grid.rate_at(point);
}

TEST(RateGrid, MeasuredPointsComeBackExactly) {
  const RateGrid grid = gemm_grid();
  EXPECT_DOUBLE_EQ(at(grid, 64, 64, 64), 1);
  EXPECT_DOUBLE_EQ(at(grid, 64, 64, 256), 2);
  EXPECT_DOUBLE_EQ(at(grid, 64, 256, 64), 4);
  EXPECT_DOUBLE_EQ(at(grid, 256, 256, 256), 128);
}

TEST(RateGrid, HalfwayInOctavesIsTheGeometricMean) {
  // 128 is one octave above 64 and one below 256.
  EXPECT_NEAR(at(gemm_grid(), 64, 64, 128), std::sqrt(1.0 * 2.0), 1e-12);
  EXPECT_NEAR(at(gemm_grid(), 128, 128, 128), std::pow(2.0, 3.5), 1e-9);
}

TEST(RateGrid, SizesBeyondTheGridKeepTheEdgesRate) {
  EXPECT_DOUBLE_EQ(at(gemm_grid(), 50000, 50000, 50000), 128);
  EXPECT_DOUBLE_EQ(at(gemm_grid(), 1, 1, 1), 1);
}

TEST(RateGrid, AnAxisOfOneValueIsConstantAlongIt) {
  RateGrid grid;
  grid.axes = {{128}, {64, 128}};
  grid.rates = {3, 12};
  const std::array<double, 2> low{4096, 64}, mid{1, 90.5096679918781};
  EXPECT_DOUBLE_EQ(grid.rate_at(low), 3);
  EXPECT_NEAR(grid.rate_at(mid), 6, 1e-9);
}

TEST(RateGrid, AnEmptyGridIsValid) { EXPECT_EQ(user_error_of([] { check_rate_grid({}, "g"); }), ""); }

TEST(RateGrid, RefusesRatesThatDoNotFillTheGrid) {
  RateGrid grid = gemm_grid();
  grid.rates.pop_back();
  EXPECT_THAT(user_error_of([&] { check_rate_grid(grid, "gemm"); }),
              HasSubstr("gemm: 7 rates for a grid of 8 points"));
}

TEST(RateGrid, RefusesAnAxisNotStrictlyAscending) {
  RateGrid grid = gemm_grid();
  grid.axes[1] = {256, 64};
  EXPECT_THAT(user_error_of([&] { check_rate_grid(grid, "gemm"); }),
              HasSubstr("axis 1 is not strictly ascending"));
}

TEST(RateGrid, RefusesZeroNegativeAndNonFiniteValues) {
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    RateGrid axis = gemm_grid();
    axis.axes[2][0] = bad;
    EXPECT_THAT(user_error_of([&] { check_rate_grid(axis, "gemm"); }),
                HasSubstr("not a finite positive number"));
    RateGrid rate = gemm_grid();
    rate.rates[3] = bad;
    EXPECT_THAT(user_error_of([&] { check_rate_grid(rate, "gemm"); }),
                HasSubstr("a rate is not a finite positive number"));
  }
}

TEST(RateGrid, RefusesSizesAndRatesNoMachineHas) {
  RateGrid tiny_size = gemm_grid();
  tiny_size.axes[0][0] = 0.5;
  EXPECT_THAT(user_error_of([&] { check_rate_grid(tiny_size, "gemm"); }),
              HasSubstr("axis 0 holds a size outside 1 to 1e12"));
  for (double bad : {1e-300, 1e30}) {
    RateGrid rate = gemm_grid();
    rate.rates[0] = bad;
    EXPECT_THAT(user_error_of([&] { check_rate_grid(rate, "gemm"); }),
                HasSubstr("a rate outside 1 to 1e18 per second"));
  }
}

TEST(RateGrid, RefusesRatesWithoutAxesAndAnEmptyAxis) {
  RateGrid no_axes;
  no_axes.rates = {1};
  EXPECT_THAT(user_error_of([&] { check_rate_grid(no_axes, "g"); }), HasSubstr("without axes"));
  RateGrid empty_axis = gemm_grid();
  empty_axis.axes[0].clear();
  EXPECT_THAT(user_error_of([&] { check_rate_grid(empty_axis, "g"); }), HasSubstr("axis 0 is empty"));
}

}  // namespace rate_grid_test
}  // namespace megatron::plan
