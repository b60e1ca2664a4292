// Megatron's process groups over the MPI world, for every tp x cp x dp x pp layout of the job's
// ranks: coordinates, sizes, and the exact members of each group, found by communicating in it.
#include "parallel/process_groups.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.hpp"
#include "dist/self_communicator.hpp"
#include "mpi_world.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::parallel {
namespace {

using dist::Communicator;
using tensor::DType;

struct Layout {
  int tp, cp, dp, pp;
};

std::vector<Layout> layouts_of(int world) {
  std::vector<Layout> out;
  for (int tp = 1; tp <= world; ++tp)
    for (int cp = 1; cp <= world; ++cp)
      for (int dp = 1; dp <= world; ++dp)
        for (int pp = 1; pp <= world; ++pp)
          if (tp * cp * dp * pp == world) out.push_back({tp, cp, dp, pp});
  return out;
}

std::string describe(const Layout& l) {
  return "tp" + std::to_string(l.tp) + " cp" + std::to_string(l.cp) + " dp" + std::to_string(l.dp) +
         " pp" + std::to_string(l.pp);
}

class ProcessGroupsTest : public ::testing::Test {
 protected:
  // The world ranks of `group`'s members in group-rank order, as the group itself sees them;
  // checked against an all-reduce of one bit per world rank, which sums exactly the members.
  std::vector<int32_t> members(Communicator& group, int world_rank) {
    tensor::Tensor mine = tensor::from_ints(backend, std::vector<int32_t>{world_rank}, {1});
    tensor::Tensor all = backend.empty({group.size()}, DType::I32);
    group.all_gather(mine, all);
    const std::vector<int32_t> gathered = tensor::to_ints(backend, all);
    tensor::Tensor bit = tensor::from_ints(backend, std::vector<int32_t>{1 << world_rank}, {1});
    group.all_reduce(bit);
    int32_t mask = 0;
    for (int32_t r : gathered) mask |= 1 << r;
    EXPECT_EQ(tensor::to_ints(backend, bit)[0], mask) << group.name();
    return gathered;
  }

  // The world ranks along one axis from this rank's coordinate, in order of that axis.
  static std::vector<int32_t> along(const ProcessGroups& g, int n,
                                    const std::function<void(Coord&, int)>& set) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      Coord c = g.coord;
      set(c, i);
      out.push_back(g.rank_of(c));
    }
    return out;
  }

  tensor::CpuBackend backend{1};
};

TEST_F(ProcessGroupsTest, EveryLayoutGivesMegatronsGroups) {
  const int size = dist::mpi_world()->size();
  for (const Layout& l : layouts_of(size)) {
    SCOPED_TRACE(describe(l));
    ProcessGroups g = make_process_groups(dist::mpi_world(), l.tp, l.cp, l.dp, l.pp);
    const int rank = g.world_rank;
    const Coord c = g.coord;
    EXPECT_EQ(rank, g.world->rank());
    EXPECT_EQ(rank, c.tp + l.tp * (c.cp + l.cp * (c.dp + l.dp * c.pp)));
    EXPECT_EQ(g.rank_of(c), rank);
    EXPECT_EQ(g.coord_of(rank), c);

    EXPECT_EQ(members(*g.tp, rank), along(g, l.tp, [](Coord& x, int i) { x.tp = i; }));
    EXPECT_EQ(members(*g.cp, rank), along(g, l.cp, [](Coord& x, int i) { x.cp = i; }));
    EXPECT_EQ(members(*g.dp, rank), along(g, l.dp, [](Coord& x, int i) { x.dp = i; }));
    EXPECT_EQ(members(*g.pp, rank), along(g, l.pp, [](Coord& x, int i) { x.pp = i; }));
    EXPECT_EQ(g.tp->rank(), c.tp);
    EXPECT_EQ(g.cp->rank(), c.cp);
    EXPECT_EQ(g.dp->rank(), c.dp);
    EXPECT_EQ(g.pp->rank(), c.pp);  // pp rank == stage index
    EXPECT_EQ(g.first_stage(), c.pp == 0);
    EXPECT_EQ(g.last_stage(), c.pp == l.pp - 1);

    // model-parallel: tp fastest, then pp, over this (cp, dp).
    const auto tp_pp = [&](Coord& x, int i) {
      x.tp = i % l.tp;
      x.pp = i / l.tp;
    };
    EXPECT_EQ(members(*g.model_parallel, rank), along(g, l.tp * l.pp, tp_pp));
    EXPECT_EQ(g.model_parallel->rank(), c.tp + l.tp * c.pp);

    if (l.pp > 1 && (g.first_stage() || g.last_stage())) {
      ASSERT_NE(g.embedding, nullptr);
      const auto ends = [&](Coord& x, int i) { x.pp = i == 0 ? 0 : l.pp - 1; };
      EXPECT_EQ(members(*g.embedding, rank), along(g, 2, ends));
      EXPECT_EQ(g.embedding->rank(), g.first_stage() ? 0 : 1);
    } else {
      EXPECT_EQ(g.embedding, nullptr);
    }
    for (const auto* group : {&g.tp, &g.cp, &g.dp, &g.pp, &g.model_parallel}) {
      EXPECT_NE((*group)->name(), "world");
    }
    EXPECT_EQ(g.tp->name(), "tp");
    EXPECT_EQ(g.model_parallel->name(), "model-parallel");
    if (g.embedding) EXPECT_EQ(g.embedding->name(), "embedding");
  }
}

// The layout of the brief, spelled out: ranks 0..7 of tp2 x dp2 x pp2 (cp1).
TEST_F(ProcessGroupsTest, TwoByTwoByTwoMatchesMegatronsTable) {
  if (dist::mpi_world()->size() != 8) GTEST_SKIP() << "needs 8 ranks";
  ProcessGroups g = make_process_groups(dist::mpi_world(), 2, 1, 2, 2);
  const int r = g.world_rank;
  EXPECT_EQ(g.coord, (Coord{.tp = r % 2, .cp = 0, .dp = r / 2 % 2, .pp = r / 4}));
  // By Megatron's rank order: tp groups [0,1] [2,3] [4,5] [6,7]; dp [0,2] [1,3] [4,6] [5,7];
  // pp [0,4] [1,5] [2,6] [3,7]; model-parallel [0,1,4,5] [2,3,6,7].
  const std::vector<std::vector<int32_t>> tp = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  const std::vector<std::vector<int32_t>> dp = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  const std::vector<std::vector<int32_t>> pp = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  const std::vector<std::vector<int32_t>> mp = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  EXPECT_EQ(members(*g.tp, r), tp[size_t(r / 2)]);
  EXPECT_EQ(members(*g.dp, r), dp[size_t(r % 2 + 2 * (r / 4))]);
  EXPECT_EQ(members(*g.pp, r), pp[size_t(r % 4)]);
  EXPECT_EQ(members(*g.model_parallel, r), mp[size_t(r / 2 % 2)]);
  ASSERT_NE(g.embedding, nullptr);  // two stages: every rank is first or last
  EXPECT_EQ(members(*g.embedding, r), pp[size_t(r % 4)]);
  EXPECT_EQ(g.cp->size(), 1);
}

TEST_F(ProcessGroupsTest, AMismatchedWorldSizeNamesBothNumbers) {
  const int size = dist::mpi_world()->size();
  try {
    make_process_groups(dist::mpi_world(), 2, 1, size, 1);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs " + std::to_string(2 * size) +
                                         " ranks, but the job has " + std::to_string(size)),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_process_groups(dist::mpi_world(), 0, 1, size, 1), UserError);
}

TEST_F(ProcessGroupsTest, AWorldOfOneNeedsNoMpi) {
  ProcessGroups g = make_process_groups(std::make_unique<dist::SelfCommunicator>(), 1, 1, 1, 1);
  EXPECT_EQ(g.coord, Coord{});
  EXPECT_TRUE(g.first_stage());
  EXPECT_TRUE(g.last_stage());
  for (const auto* group : {&g.world, &g.tp, &g.cp, &g.dp, &g.pp, &g.model_parallel}) {
    ASSERT_NE(*group, nullptr);
    EXPECT_EQ((*group)->size(), 1);
  }
  EXPECT_EQ(g.pp->name(), "pp");
  EXPECT_EQ(g.embedding, nullptr);
  EXPECT_THROW(make_process_groups(std::make_unique<dist::SelfCommunicator>(), 1, 1, 1, 2),
               UserError);
  EXPECT_THROW(g.rank_of({.tp = 1}), std::out_of_range);
}

}  // namespace
}  // namespace megatron::parallel
