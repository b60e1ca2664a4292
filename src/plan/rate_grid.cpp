#include "plan/rate_grid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace megatron::plan {
namespace {

bool positive(double v) { return std::isfinite(v) && v > 0; }

// Where `value` falls on `axis`: the lower index and the weight of the upper one, in log2.
struct Bracket {
  std::size_t lower = 0;
  double upper_weight = 0;
};

Bracket bracket(const std::vector<double>& axis, double value) {
  if (axis.size() == 1 || value <= axis.front()) return {0, 0};
  if (value >= axis.back()) return {axis.size() - 2, 1};
  const std::size_t upper =
      static_cast<std::size_t>(std::upper_bound(axis.begin(), axis.end(), value) - axis.begin());
  const double lo = std::log2(axis[upper - 1]), hi = std::log2(axis[upper]);
  return {upper - 1, (std::log2(value) - lo) / (hi - lo)};
}

}  // namespace

double RateGrid::rate_at(std::span<const double> point) const {
  const std::size_t dims = axes.size();
  std::vector<Bracket> at(dims);
  for (std::size_t i = 0; i < dims; ++i) at[i] = bracket(axes[i], point[i]);
  // Sum over the 2^dims corners of the cell; an axis of one value has one corner.
  double log_rate = 0;
  for (std::size_t corner = 0; corner < (std::size_t{1} << dims); ++corner) {
    double weight = 1;
    std::size_t index = 0;
    bool used = true;
    for (std::size_t i = 0; i < dims; ++i) {
      const bool upper = (corner >> i) & 1;
      if (upper && axes[i].size() == 1) {
        used = false;
        break;
      }
      weight *= upper ? at[i].upper_weight : 1 - at[i].upper_weight;
      index = index * axes[i].size() + at[i].lower + (upper ? 1 : 0);
    }
    if (used && weight > 0) log_rate += weight * std::log(rates[index]);
  }
  return std::exp(log_rate);
}

void check_rate_grid(const RateGrid& grid, const std::string& what) {
  if (grid.axes.empty() && grid.rates.empty()) return;
  if (grid.axes.empty()) throw UserError(what + ": rates given without axes");
  if (grid.axes.size() > 8) throw UserError(what + ": more than 8 axes");
  std::size_t points = 1;
  for (std::size_t i = 0; i < grid.axes.size(); ++i) {
    const std::vector<double>& axis = grid.axes[i];
    if (axis.empty()) throw UserError(what + ": axis " + std::to_string(i) + " is empty");
    for (std::size_t j = 0; j < axis.size(); ++j) {
      if (!positive(axis[j]))
        throw UserError(what + ": axis " + std::to_string(i) + " holds a value that is not a "
                        "finite positive number");
      if (axis[j] < 1 || axis[j] > 1e12)
        throw UserError(what + ": axis " + std::to_string(i) + " holds a size outside 1 to 1e12");
      if (j > 0 && axis[j] <= axis[j - 1])
        throw UserError(what + ": axis " + std::to_string(i) + " is not strictly ascending");
    }
    if (points > std::numeric_limits<std::size_t>::max() / axis.size())
      throw UserError(what + ": the grid has too many points");
    points *= axis.size();
  }
  if (grid.rates.size() != points)
    throw UserError(what + ": " + std::to_string(grid.rates.size()) + " rates for a grid of " +
                    std::to_string(points) + " points");
  for (double rate : grid.rates)
    if (!positive(rate)) throw UserError(what + ": a rate is not a finite positive number");
    else if (rate < 1 || rate > 1e18)
      throw UserError(what + ": a rate outside 1 to 1e18 per second");
}

}  // namespace megatron::plan
