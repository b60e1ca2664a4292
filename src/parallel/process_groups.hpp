// Megatron's process groups: the world split into tensor-, context-, data- and pipeline-parallel
// groups (plus model-parallel and embedding), each rank knowing its (tp, cp, dp, pp) coordinate.
#pragma once

#include <memory>

#include "dist/communicator.hpp"
#include "parallel/layout.hpp"

namespace megatron::parallel {

// A rank's place in the grid, in the Plan's rank order (Layout: tensor-parallel peers are
// neighbours, pipeline stages farthest apart).
struct Coord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  bool operator==(const Coord&) const = default;
};

struct ProcessGroups {
  int tp_size = 1, cp_size = 1, dp_size = 1, pp_size = 1;
  Layout layout;  // the one rank <-> coordinate formula
  Coord coord;
  int world_rank = 0;

  // Each group's rank is this rank's coordinate along it (pp rank == stage index).
  std::unique_ptr<dist::Communicator> world, tp, cp, dp, pp;
  // The tp x pp ranks sharing this rank's (cp, dp): a gradient norm sums over it.
  std::unique_ptr<dist::Communicator> model_parallel;
  // The first and last pipeline stages of this (tp, cp, dp), which hold the tied embedding;
  // rank 0 is the first stage. Null on middle stages and when pp_size == 1.
  std::unique_ptr<dist::Communicator> embedding;

  bool first_stage() const { return coord.pp == 0; }
  bool last_stage() const { return coord.pp == pp_size - 1; }
  // The world rank at `c`; throws std::out_of_range outside the grid.
  int rank_of(const Coord& c) const;
  Coord coord_of(int world_rank) const;
};

// Splits `world` into the groups of a tp x cp x dp x pp layout. Collective: every rank of
// `world` calls it with the same sizes. Throws UserError when the sizes are not positive or
// their product is not world->size(). A world of one (SelfCommunicator) gives groups of one.
ProcessGroups make_process_groups(std::unique_ptr<dist::Communicator> world,
                                  const Layout& layout);
ProcessGroups make_process_groups(std::unique_ptr<dist::Communicator> world, int tp, int cp, int dp,
                                  int pp);

}  // namespace megatron::parallel
