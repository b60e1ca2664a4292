// The SelfCommunicator of a world of one: collectives leave or copy tensors, point-to-point has
// no peer. Needs no MPI; it runs inside the dist tests' binary on every rank alike.
#include "dist/self_communicator.hpp"

#include <gtest/gtest.h>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

class SelfCommunicatorTest : public ::testing::Test {
 protected:
  tensor::CpuBackend backend{1};
  SelfCommunicator self;
  Communicator& comm = self;  // the interface holds the default arguments
};

TEST_F(SelfCommunicatorTest, IsRankZeroOfOneNamedWorld) {
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.name(), "world");
}

TEST_F(SelfCommunicatorTest, AllReduceAndBroadcastLeaveTheTensorAlone) {
  Tensor x = tensor::from_floats(backend, std::vector<float>{1.5f, -2.0f}, {2}, DType::Bf16);
  comm.all_reduce(x);
  comm.all_reduce(x, ReduceOp::Max);
  comm.all_reduce_async(x)->wait();
  comm.broadcast(x, 0);
  comm.barrier();
  EXPECT_EQ(tensor::to_floats(backend, x), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_THROW(comm.broadcast(x, 1), std::logic_error);
}

TEST_F(SelfCommunicatorTest, ReduceScatterAndAllGatherCopyTheOneChunk) {
  Tensor in = tensor::from_ints(backend, std::vector<int32_t>{3, 4, 5}, {3});
  Tensor out = backend.empty({1, 3}, DType::I32);
  comm.reduce_scatter(in, out);
  EXPECT_EQ(tensor::to_ints(backend, out), (std::vector<int32_t>{3, 4, 5}));
  Tensor gathered = backend.empty({3}, DType::I32);
  comm.all_gather(out, gathered);
  EXPECT_EQ(tensor::to_ints(backend, gathered), (std::vector<int32_t>{3, 4, 5}));
  comm.all_gather(gathered, gathered);  // in place: nothing to do
  EXPECT_EQ(tensor::to_ints(backend, gathered), (std::vector<int32_t>{3, 4, 5}));
}

TEST_F(SelfCommunicatorTest, ChunkedCollectivesRefuseMismatchedShapes) {
  Tensor in = backend.empty({4}, DType::F32);
  Tensor out = backend.empty({2}, DType::F32);
  EXPECT_THROW(comm.reduce_scatter(in, out), std::logic_error);
  EXPECT_THROW(comm.all_gather(out, in), std::logic_error);
  Tensor ints = backend.empty({4}, DType::I32);
  EXPECT_THROW(comm.all_gather(in, ints), std::logic_error);
}

TEST_F(SelfCommunicatorTest, PointToPointHasNoPeer) {
  Tensor x = backend.empty({1}, DType::F32);
  EXPECT_THROW(comm.send(x, 0), std::logic_error);
  EXPECT_THROW(comm.recv(x, 0), std::logic_error);
  EXPECT_THROW(comm.send_async(x, 1), std::logic_error);
  EXPECT_THROW(comm.recv_async(x, 1), std::logic_error);
}

TEST_F(SelfCommunicatorTest, SplitGivesAGroupOfOneOrNone) {
  auto tp = comm.split(0, 0, "tp");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->name(), "tp");
  EXPECT_EQ(tp->size(), 1);
  EXPECT_EQ(comm.split(kNoGroup, 0, "embedding"), nullptr);
}

}  // namespace
}  // namespace megatron::dist
