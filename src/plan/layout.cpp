// Rank <-> (tp, cp, dp, pp) coordinates in Megatron's order: tensor-parallel ranks are
// adjacent (they talk most), pipeline stages are furthest apart.
#include "plan/plan.hpp"

namespace megatron::plan {

Layout::Coord Layout::coord(int64_t rank) const {
  Coord out{};
  out.tp = rank % tp;
  rank /= tp;
  out.cp = rank % cp;
  rank /= cp;
  out.dp = rank % dp;
  out.pp = rank / dp;
  return out;
}

int64_t Layout::rank(const Coord& x) const { return x.tp + tp * (x.cp + cp * (x.dp + dp * x.pp)); }

}  // namespace megatron::plan
