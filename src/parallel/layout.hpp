// The rank grid in Megatron's order: rank = tp + TP * (cp + CP * (dp + DP * pp)), so
// tensor-parallel ranks are adjacent (they talk most) and pipeline stages furthest apart.
#pragma once

#include <cstdint>

namespace megatron::parallel {

struct Layout {
  int64_t tp = 1, cp = 1, dp = 1, pp = 1, vpp = 1;
  int64_t world = 1;
  struct Coord { int64_t tp, cp, dp, pp; };

  Coord coord(int64_t rank) const {
    Coord out{};
    out.tp = rank % tp;
    rank /= tp;
    out.cp = rank % cp;
    rank /= cp;
    out.dp = rank % dp;
    out.pp = rank / dp;
    return out;
  }
  int64_t rank(const Coord& x) const { return x.tp + tp * (x.cp + cp * (x.dp + dp * x.pp)); }
};

}  // namespace megatron::parallel
