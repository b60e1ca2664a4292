// Measured throughput on a grid of problem sizes (GEMM m x n x k, attention sequence x head dim)
// and the rate the cost model predicts between and beyond the measured points.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace megatron::plan {

// rates holds one measurement per point of the product of the axes, row-major (the last axis
// varies fastest). A rate is work per second (FLOP/s). Empty: nothing measured.
struct RateGrid {
  std::vector<std::vector<double>> axes;  // each ascending, every value > 0
  std::vector<double> rates;              // every rate > 0

  bool empty() const { return rates.empty(); }
  // Interpolates log(rate) multilinearly in log2 of each coordinate, so a size halfway (in
  // octaves) between two measured ones gets the geometric mean of their rates. Outside an axis
  // the nearest measured value holds: throughput saturates for large sizes, and below the
  // smallest one the caller's sizes are rare. point.size() == axes.size(); grid not empty.
  double rate_at(std::span<const double> point) const;
};

// Throws UserError naming `what` ("gemm_16bit") when the grid is malformed: axes empty, an axis
// empty or not strictly ascending, a value not finite and positive, or rates.size() not the
// product of the axes' sizes, or a size outside 1 to 1e12 or a rate outside 1 to 1e18 (what
// keeps the times priced from them finite). An empty grid (no axes, no rates) is valid.
void check_rate_grid(const RateGrid& grid, const std::string& what);

}  // namespace megatron::plan
