// The MPI Communicator, run by ctest under `mpiexec -n 4` and `-n 8` (see tests/CMakeLists.txt):
// every rank runs every test, and each test checks what its own rank received.
#include <gtest/gtest.h>

#include "dist/broadcast_text.hpp"
#include "dist/launcher.hpp"
#include "mpi_world.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

class CommunicatorTest : public ::testing::Test {
 protected:
  tensor::CpuBackend backend{1};
  std::unique_ptr<Communicator> comm = mpi_world();
  int rank = comm->rank();
  int size = comm->size();
};

TEST_F(CommunicatorTest, TheWorldMatchesWhatTheLauncherSaid) {
  const LaunchInfo info = launch_info();
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.rank, rank);
  EXPECT_EQ(info.world_size, size);
  EXPECT_GE(size, 2) << "run these tests under mpiexec with several ranks";
}

// Text of any length (none, not a multiple of four bytes, bytes past ASCII and NUL) arrives
// whole from the root, whatever the others passed.
TEST_F(CommunicatorTest, BroadcastTextGivesEveryRankTheRootsTextWhole) {
  const int root = size - 1;
  for (const std::string& text : {std::string(), std::string("runs/gpt/20261207-1200"),
                                  std::string("a\0b\xff\xc3\xa9", 6), std::string(70001, 'x')}) {
    const std::string mine = rank == root ? text : std::string("ignored on rank ") + std::to_string(rank);
    EXPECT_EQ(broadcast_text(*comm, backend, mine, root), text) << "length " << text.size();
  }
}

TEST_F(CommunicatorTest, AllReduceSumsOverEveryRank) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{float(rank + 1), 1.0f}, {2});
  comm->all_reduce(x);
  EXPECT_EQ(tensor::to_floats(backend, x), (std::vector<float>{size * (size + 1) / 2.0f, float(size)}));
}

TEST_F(CommunicatorTest, AllReduceMaxTakesTheLargest) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{float(rank), -float(rank)}, {2});
  comm->all_reduce(x, ReduceOp::Max);
  EXPECT_EQ(tensor::to_floats(backend, x), (std::vector<float>{float(size - 1), 0.0f}));
}

TEST_F(CommunicatorTest, SixteenBitTensorsReduceInF32) {
  // 256 + 1 + 1 + ... is not representable step by step in bf16 (spacing 2 at 256), but the
  // f32 sum 256 + (size - 1) rounds to the nearest bf16 once.
  Tensor x = tensor::from_floats(backend, std::vector<float>{rank == 0 ? 256.0f : 1.0f}, {1},
                                 DType::Bf16);
  comm->all_reduce(x);
  const float expected = tensor::to_float(tensor::to_bf16(256.0f + float(size - 1)));
  EXPECT_EQ(tensor::to_floats(backend, x)[0], expected);
}

TEST_F(CommunicatorTest, IntegerTensorsReduceExactly) {
  Tensor x = tensor::from_ints(backend, std::vector<int32_t>{rank, 1 << 24}, {2});
  comm->all_reduce(x);
  EXPECT_EQ(tensor::to_ints(backend, x), (std::vector<int32_t>{size * (size - 1) / 2, size << 24}));
}

TEST_F(CommunicatorTest, AsyncAllReduceCompletesOnWait) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{1.0f}, {1}, DType::F16);
  auto request = comm->all_reduce_async(x);
  request->wait();
  EXPECT_EQ(tensor::to_floats(backend, x)[0], float(size));
}

TEST_F(CommunicatorTest, ReduceScatterGivesEachRankTheSumOfItsChunk) {
  std::vector<float> in(size_t(2 * size));
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + float(rank);
  Tensor whole = tensor::from_floats(backend, in, {2 * size});
  Tensor mine = backend.empty({2}, DType::F32);
  comm->reduce_scatter(whole, mine);
  const float ranks = size * (size - 1) / 2.0f;
  EXPECT_EQ(tensor::to_floats(backend, mine),
            (std::vector<float>{size * float(2 * rank) + ranks, size * float(2 * rank + 1) + ranks}));
}

TEST_F(CommunicatorTest, AllGatherConcatenatesInRankOrder) {
  Tensor mine = tensor::from_ints(backend, std::vector<int32_t>{rank, 10 * rank}, {2});
  Tensor all = backend.empty({size, 2}, DType::I32);
  comm->all_gather(mine, all);
  const auto got = tensor::to_ints(backend, all);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[size_t(2 * r)], r);
    EXPECT_EQ(got[size_t(2 * r + 1)], 10 * r);
  }
}

TEST_F(CommunicatorTest, ReduceScatterInPlaceLeavesTheSumInThisRanksOwnChunk) {
  std::vector<float> in(size_t(2 * size));
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + float(rank);
  Tensor whole = tensor::from_floats(backend, in, {2 * size});
  Tensor mine = whole.slice(2 * rank, 2 * rank + 2);
  comm->reduce_scatter(whole, mine);
  const float ranks = size * (size - 1) / 2.0f;
  EXPECT_EQ(tensor::to_floats(backend, mine),
            (std::vector<float>{size * float(2 * rank) + ranks, size * float(2 * rank + 1) + ranks}));
}

TEST_F(CommunicatorTest, AsyncReduceScatterCompletesOnWaitInPlaceAndIn16Bits) {
  std::vector<float> in(size_t(2 * size), 1.0f);
  Tensor whole = tensor::from_floats(backend, in, {2 * size});
  Tensor mine = whole.slice(2 * rank, 2 * rank + 2);
  Tensor wide = tensor::from_floats(backend, in, {2 * size}, DType::Bf16);
  Tensor narrow = backend.empty({2}, DType::Bf16);
  auto first = comm->reduce_scatter_async(whole, mine);
  auto second = comm->reduce_scatter_async(wide, narrow);
  second->wait();
  first->wait();
  EXPECT_EQ(tensor::to_floats(backend, mine), (std::vector<float>{float(size), float(size)}));
  EXPECT_EQ(tensor::to_floats(backend, narrow), (std::vector<float>{float(size), float(size)}));
}

TEST_F(CommunicatorTest, AllGatherInPlaceFillsEveryOtherRanksChunk) {
  Tensor all = backend.zeros({size, 2}, DType::I32);
  Tensor mine = all.slice(rank, rank + 1);
  tensor::Tensor values = tensor::from_ints(backend, std::vector<int32_t>{rank, 10 * rank}, {1, 2});
  backend.copy(values, mine);
  comm->all_gather(mine, all);
  const auto got = tensor::to_ints(backend, all);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[size_t(2 * r)], r);
    EXPECT_EQ(got[size_t(2 * r + 1)], 10 * r);
  }
}

TEST_F(CommunicatorTest, TestReportsARequestDoneOnceItHasCompleted) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{1.0f}, {1});
  auto request = comm->all_reduce_async(x);
  while (!request->test()) {
  }
  EXPECT_TRUE(request->test());  // stays done
  EXPECT_EQ(tensor::to_floats(backend, x)[0], float(size));
}

TEST_F(CommunicatorTest, BroadcastCopiesTheRootsTensorEverywhere) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{float(rank), 7.0f}, {2}, DType::Bf16);
  comm->broadcast(x, size - 1);
  EXPECT_EQ(tensor::to_floats(backend, x), (std::vector<float>{float(size - 1), 7.0f}));
}

TEST_F(CommunicatorTest, SendAndReceivePassATensorAroundARing) {
  Tensor out = tensor::from_floats(backend, std::vector<float>{float(rank)}, {1});
  Tensor in = backend.empty({1}, DType::F32);
  auto receiving = comm->recv_async(in, (rank + size - 1) % size, 3);
  comm->send(out, (rank + 1) % size, 3);
  receiving->wait();
  EXPECT_EQ(tensor::to_floats(backend, in)[0], float((rank + size - 1) % size));
}

TEST_F(CommunicatorTest, SplitFormsGroupsByColorOrderedByKey) {
  // Two groups, even and odd ranks, each ordered by descending world rank.
  auto group = comm->split(rank % 2, -rank, "parity");
  const int members = size / 2 + (rank % 2 == 0 ? size % 2 : 0);
  EXPECT_EQ(group->size(), members);
  EXPECT_EQ(group->name(), "parity");
  Tensor x = tensor::from_floats(backend, std::vector<float>{float(rank)}, {1});
  group->all_reduce(x);
  float expected = 0;
  for (int r = rank % 2; r < size; r += 2) expected += float(r);
  EXPECT_EQ(tensor::to_floats(backend, x)[0], expected);
  const int higher_same_parity = (size - 1 - rank) / 2;  // ranks ordered before this one
  EXPECT_EQ(group->rank(), higher_same_parity);
}

TEST_F(CommunicatorTest, SplitWithNoGroupLeavesThatRankOut) {
  // Odd ranks join no group, yet call split: it is collective over the parent.
  auto group = comm->split(rank % 2 == 0 ? 0 : kNoGroup, rank, "even");
  if (rank % 2 == 1) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), (size + 1) / 2);
  EXPECT_EQ(group->rank(), rank / 2);
  Tensor x = tensor::from_ints(backend, std::vector<int32_t>{rank}, {1});
  group->all_reduce(x);
  int32_t expected = 0;
  for (int r = 0; r < size; r += 2) expected += r;
  EXPECT_EQ(tensor::to_ints(backend, x)[0], expected);
}

TEST_F(CommunicatorTest, ChunkedCollectivesRefuseMismatchedShapes) {
  Tensor whole = backend.empty({size + 1}, DType::F32);
  Tensor mine = backend.empty({1}, DType::F32);
  EXPECT_THROW(comm->reduce_scatter(whole, mine), std::logic_error);
  EXPECT_THROW(comm->all_gather(mine, whole), std::logic_error);
}

}  // namespace
}  // namespace megatron::dist
