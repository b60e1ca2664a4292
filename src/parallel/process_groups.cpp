#include "parallel/process_groups.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace megatron::parallel {

int ProcessGroups::rank_of(const Coord& c) const {
  if (c.tp < 0 || c.tp >= tp_size || c.cp < 0 || c.cp >= cp_size || c.dp < 0 || c.dp >= dp_size ||
      c.pp < 0 || c.pp >= pp_size) {
    throw std::out_of_range("coordinate (tp " + std::to_string(c.tp) + ", cp " +
                            std::to_string(c.cp) + ", dp " + std::to_string(c.dp) + ", pp " +
                            std::to_string(c.pp) + ") is outside the grid");
  }
  return int(layout.rank({.tp = c.tp, .cp = c.cp, .dp = c.dp, .pp = c.pp}));
}

Coord ProcessGroups::coord_of(int rank) const {
  if (rank < 0 || rank >= layout.world) {
    throw std::out_of_range("world rank " + std::to_string(rank) + " is outside the grid");
  }
  const Layout::Coord c = layout.coord(rank);
  return {.tp = int(c.tp), .cp = int(c.cp), .dp = int(c.dp), .pp = int(c.pp)};
}

ProcessGroups make_process_groups(std::unique_ptr<dist::Communicator> world, int tp, int cp, int dp,
                                  int pp) {
  return make_process_groups(std::move(world), Layout{.tp = tp, .cp = cp, .dp = dp, .pp = pp,
                                                            .world = int64_t{tp} * cp * dp * pp});
}

ProcessGroups make_process_groups(std::unique_ptr<dist::Communicator> world,
                                  const Layout& grid) {
  const int tp = int(grid.tp), cp = int(grid.cp), dp = int(grid.dp), pp = int(grid.pp);
  const std::string layout = "tp " + std::to_string(tp) + " x cp " + std::to_string(cp) + " x dp " +
                             std::to_string(dp) + " x pp " + std::to_string(pp);
  if (tp < 1 || cp < 1 || dp < 1 || pp < 1) {
    throw UserError("parallel layout " + layout + ": every size must be at least 1");
  }
  if (int64_t{tp} * cp * dp * pp != world->size()) {
    throw UserError("parallel layout " + layout + " needs " +
                    std::to_string(int64_t{tp} * cp * dp * pp) + " ranks, but the job has " +
                    std::to_string(world->size()));
  }
  ProcessGroups g{.tp_size = tp, .cp_size = cp, .dp_size = dp, .pp_size = pp, .layout = grid};
  g.layout.world = int64_t{tp} * cp * dp * pp;
  g.world_rank = world->rank();
  g.coord = g.coord_of(g.world_rank);
  const Coord c = g.coord;

  // Color: the coordinates a group's members share, numbered; key: the coordinate along the
  // group, so each group's rank is that coordinate. Every rank makes the same splits in the
  // same order, as MPI_Comm_split is collective over the world.
  g.tp = world->split(c.cp + cp * (c.dp + dp * c.pp), c.tp, "tp");
  g.cp = world->split(c.tp + tp * (c.dp + dp * c.pp), c.cp, "cp");
  g.dp = world->split(c.tp + tp * (c.cp + cp * c.pp), c.dp, "dp");
  g.pp = world->split(c.tp + tp * (c.cp + cp * c.dp), c.pp, "pp");
  g.model_parallel = world->split(c.cp + cp * c.dp, c.tp + tp * c.pp, "model-parallel");
  if (pp > 1) {
    const bool member = g.first_stage() || g.last_stage();
    g.embedding =
        world->split(member ? c.tp + tp * (c.cp + cp * c.dp) : dist::kNoGroup, c.pp, "embedding");
  }
  g.world = std::move(world);
  return g;
}

}  // namespace megatron::parallel
