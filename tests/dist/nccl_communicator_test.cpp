// The NCCL Communicator (dist/nccl_communicator.hpp), in the dist tests' MPI job of 4 and 8
// ranks (CUDA builds only). The unique-id bootstrap needs no GPU and always runs. The rest needs
// a GPU per rank; the ranks decide together whether they have one, so that all of them skip or
// none does (a rank left alone in a collective would wait for the watchdog).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/launcher.hpp"
#include "dist/nccl_communicator.hpp"
#include "mpi_world.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/cuda_backend.hpp"
#include "tensor/host_io.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr int64_t kIdWords = int64_t(kNcclUniqueIdBytes / sizeof(int32_t));

std::vector<int32_t> words_of(const NcclUniqueIdBytes& id) {
  std::vector<int32_t> words(static_cast<size_t>(kIdWords));
  std::memcpy(words.data(), id.data(), id.size());
  return words;
}

TEST(NcclUniqueIdTest, EveryRankGetsRankZerosBytes) {
  tensor::CpuBackend cpu{1};
  std::unique_ptr<Communicator> world = mpi_world();
  const NcclUniqueIdBytes id = nccl_unique_id_over(*world);
  EXPECT_TRUE(std::any_of(id.begin(), id.end(), [](std::byte b) { return b != std::byte{0}; }));
  Tensor mine = tensor::from_ints(cpu, words_of(id), {kIdWords});
  Tensor all = cpu.empty({world->size(), kIdWords}, DType::I32);
  world->all_gather(mine, all);
  const std::vector<int32_t> got = tensor::to_ints(cpu, all);
  const std::vector<int32_t> root(got.begin(), got.begin() + kIdWords);
  for (int r = 1; r < world->size(); ++r) {
    const auto first = got.begin() + r * kIdWords;
    EXPECT_EQ(std::vector<int32_t>(first, first + kIdWords), root) << "rank " << r;
  }
}

TEST(NcclUniqueIdTest, EachBootstrapGetsAFreshId) {
  std::unique_ptr<Communicator> world = mpi_world();
  const NcclUniqueIdBytes first = nccl_unique_id_over(*world);
  const NcclUniqueIdBytes second = nccl_unique_id_over(*world);
  EXPECT_NE(first, second);
}

TEST(NcclSetUpTest, WithoutAGpuEveryRankFailsTogether) {
  // A rank that failed alone would leave the others waiting in ncclCommInitRank.
  tensor::CpuBackend cpu{1};
  std::unique_ptr<Communicator> world = mpi_world();
  Tensor with_gpu =
      tensor::from_ints(cpu, std::vector<int32_t>{tensor::cuda_device_count() > 0 ? 1 : 0}, {1});
  world->all_reduce(with_gpu);
  if (tensor::to_ints(cpu, with_gpu)[0] > 0) GTEST_SKIP() << "some rank has a GPU";
  try {
    make_nccl_communicator(mpi_world(), nullptr, 0);
    ADD_FAILURE() << "an NCCL communicator without a GPU";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()).rfind("nccl: ncclCommInitRank on group world: ", 0), 0u)
        << e.what();
  }
}

// One CUDA backend and NCCL communicator over the world for the whole suite: NCCL's set-up
// takes a while, and every rank runs the same tests in the same order.
class NcclCommunicatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tensor::CpuBackend cpu{1};
    std::unique_ptr<Communicator> world = mpi_world();
    const int count = tensor::cuda_device_count();
    Tensor lacking = tensor::from_ints(cpu, std::vector<int32_t>{count < world->size() ? 1 : 0}, {1});
    world->all_reduce(lacking);
    const int ranks_lacking = tensor::to_ints(cpu, lacking)[0];
    if (ranks_lacking > 0) {
      skip_ = new std::string(
          "needs a CUDA GPU per rank: " + std::to_string(ranks_lacking) + " of the " +
          std::to_string(world->size()) + " ranks see fewer devices than that (rank " +
          std::to_string(world->rank()) + " sees " + std::to_string(count) +
          "; 0 without a driver or a GPU)");
      return;
    }
    try {
      const int device = launch_info().local_rank % count;
      backend_ = new tensor::CudaBackend(tensor::CudaOptions{.device = device});
      comm_ = make_nccl_communicator(mpi_world(), backend_->stream(), device).release();
    } catch (const std::exception& e) {
      failure_ = new std::string(e.what());
    }
  }

  static void TearDownTestSuite() {
    delete comm_;  // before the backend whose stream it orders itself after
    comm_ = nullptr;
    delete backend_;
    backend_ = nullptr;
    delete skip_;
    skip_ = nullptr;
    delete failure_;
    failure_ = nullptr;
  }

  void SetUp() override {
    if (skip_ != nullptr) GTEST_SKIP() << *skip_;
    if (failure_ != nullptr) FAIL() << "setting up NCCL failed: " << *failure_;
    ASSERT_NE(comm_, nullptr);
    comm = comm_;
    rank = comm->rank();
    size = comm->size();
  }

  tensor::CudaBackend& gpu() { return *backend_; }
  std::vector<float> floats(const Tensor& x) { return tensor::to_floats(*backend_, x); }
  std::vector<int32_t> ints(const Tensor& x) { return tensor::to_ints(*backend_, x); }

  Communicator* comm = nullptr;
  int rank = 0;
  int size = 1;

 private:
  static inline tensor::CudaBackend* backend_ = nullptr;
  static inline Communicator* comm_ = nullptr;
  static inline std::string* skip_ = nullptr;
  static inline std::string* failure_ = nullptr;
};

TEST_F(NcclCommunicatorTest, AllReduceSumsAndLaterComputeSeesTheSum) {
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{float(rank + 1), 1.0f}, {2});
  comm->all_reduce(x);
  gpu().scale(x, 2.0f);  // on the compute stream, which the all-reduce made wait for itself
  EXPECT_EQ(floats(x), (std::vector<float>{float(size * (size + 1)), 2.0f * float(size)}));
}

TEST_F(NcclCommunicatorTest, AllReduceMaxTakesTheLargest) {
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{float(rank), -float(rank)}, {2});
  comm->all_reduce(x, ReduceOp::Max);
  EXPECT_EQ(floats(x), (std::vector<float>{float(size - 1), 0.0f}));
  Tensor i = tensor::from_ints(gpu(), std::vector<int32_t>{rank, 1 << 24}, {2});
  comm->all_reduce(i);
  EXPECT_EQ(ints(i), (std::vector<int32_t>{size * (size - 1) / 2, size << 24}));
}

TEST_F(NcclCommunicatorTest, SixteenBitAllReduceSumsSmallIntegersExactly) {
  // bf16 and f16 hold every partial sum of 1..size exactly, whatever NCCL's reduction order.
  for (DType dtype : {DType::Bf16, DType::F16}) {
    Tensor x = tensor::from_floats(gpu(), std::vector<float>{float(rank + 1), -2.0f}, {2}, dtype);
    comm->all_reduce(x);
    EXPECT_EQ(floats(x), (std::vector<float>{size * (size + 1) / 2.0f, -2.0f * float(size)}))
        << tensor::name(dtype);
  }
}

TEST_F(NcclCommunicatorTest, ReduceScatterGivesEachRankTheSumOfItsChunk) {
  std::vector<float> in(size_t(2 * size));
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + float(rank);
  const float ranks = size * (size - 1) / 2.0f;
  const std::vector<float> expected{size * float(2 * rank) + ranks,
                                    size * float(2 * rank + 1) + ranks};
  Tensor whole = tensor::from_floats(gpu(), in, {2 * size});
  Tensor mine = gpu().empty({2}, DType::F32);
  comm->reduce_scatter(whole, mine);
  EXPECT_EQ(floats(mine), expected);

  Tensor again = tensor::from_floats(gpu(), in, {2 * size});
  Tensor own_chunk = again.slice(2 * rank, 2 * rank + 2);  // in place
  comm->reduce_scatter(again, own_chunk);
  EXPECT_EQ(floats(own_chunk), expected);
}

TEST_F(NcclCommunicatorTest, AsyncReduceScatterInPlaceCompletesOnWait) {
  Tensor whole = tensor::from_floats(gpu(), std::vector<float>(size_t(2 * size), 1.0f), {2 * size});
  Tensor mine = whole.slice(2 * rank, 2 * rank + 2);
  auto request = comm->reduce_scatter_async(whole, mine);
  request->wait();
  EXPECT_EQ(floats(mine), (std::vector<float>{float(size), float(size)}));
}

TEST_F(NcclCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  Tensor mine = tensor::from_ints(gpu(), std::vector<int32_t>{rank, 10 * rank}, {2});
  Tensor all = gpu().empty({size, 2}, DType::I32);
  comm->all_gather(mine, all);
  const std::vector<int32_t> got = ints(all);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[size_t(2 * r)], r);
    EXPECT_EQ(got[size_t(2 * r + 1)], 10 * r);
  }
}

TEST_F(NcclCommunicatorTest, AllGatherInPlaceFillsEveryOtherRanksChunk) {
  Tensor all = gpu().zeros({size, 2}, DType::I32);
  Tensor mine = all.slice(rank, rank + 1);
  Tensor values = tensor::from_ints(gpu(), std::vector<int32_t>{rank, 10 * rank}, {1, 2});
  gpu().copy(values, mine);
  comm->all_gather(mine, all);
  const std::vector<int32_t> got = ints(all);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[size_t(2 * r)], r);
    EXPECT_EQ(got[size_t(2 * r + 1)], 10 * r);
  }
}

TEST_F(NcclCommunicatorTest, BroadcastCopiesTheRootsTensorEverywhere) {
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{float(rank), 7.0f}, {2}, DType::Bf16);
  comm->broadcast(x, size - 1);
  EXPECT_EQ(floats(x), (std::vector<float>{float(size - 1), 7.0f}));
}

TEST_F(NcclCommunicatorTest, SendAndReceivePassATensorAroundARing) {
  Tensor out = tensor::from_floats(gpu(), std::vector<float>{float(rank)}, {1});
  Tensor in = gpu().empty({1}, DType::F32);
  auto receiving = comm->recv_async(in, (rank + size - 1) % size, 3);
  comm->send(out, (rank + 1) % size, 3);
  receiving->wait();
  EXPECT_EQ(floats(in)[0], float((rank + size - 1) % size));
}

TEST_F(NcclCommunicatorTest, SendsInOppositeDirectionsDoNotWaitForEachOther) {
  // Pairs of ranks run what a 2-stage 1F1B pipeline with 2 micro-batches posts: stage 0 sends
  // two activations, then receives two gradients; stage 1 receives an activation, sends its
  // gradient, receives the next activation, sends its gradient. A send holds its NCCL stream
  // until the receiver posts the matching receive, so on one stream stage 0's second send and
  // stage 1's first would wait for each other. 16 MiB messages: more than NCCL buffers.
  if (size % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const int64_t n = int64_t(4) << 20;
  const bool first_stage = rank % 2 == 0;
  const int peer = first_stage ? rank + 1 : rank - 1;
  auto filled = [&](float value) {
    Tensor x = gpu().empty({n}, DType::F32);
    gpu().fill(x, value);
    return x;
  };
  std::vector<Tensor> received;
  std::vector<std::unique_ptr<Request>> sends;
  if (first_stage) {
    for (int j = 0; j < 2; ++j) sends.push_back(comm->send_async(filled(float(10 + j)), peer, 0));
    for (int j = 0; j < 2; ++j) {
      received.push_back(gpu().empty({n}, DType::F32));
      comm->recv(received.back(), peer, 1);
    }
  } else {
    for (int j = 0; j < 2; ++j) {
      received.push_back(gpu().empty({n}, DType::F32));
      comm->recv(received.back(), peer, 0);
      sends.push_back(comm->send_async(filled(float(20 + j)), peer, 1));
    }
  }
  for (auto& send : sends) send->wait();
  for (int j = 0; j < 2; ++j) {
    const float expected = float((first_stage ? 20 : 10) + j);
    const std::vector<float> got = floats(received[size_t(j)]);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [&](float v) { return v == expected; }))
        << "message " << j << " starts with " << got.front() << ", expected " << expected;
  }
}

TEST_F(NcclCommunicatorTest, AsyncAllReduceTestsDoneOnceCompleteAndWaits) {
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{1.0f}, {1});
  auto request = comm->all_reduce_async(x);
  while (!request->test()) {
  }
  EXPECT_TRUE(request->test());  // stays done
  request->wait();
  EXPECT_EQ(floats(x)[0], float(size));

  Tensor y = tensor::from_floats(gpu(), std::vector<float>{2.0f}, {1});
  auto waited = comm->all_reduce_async(y, ReduceOp::Max);
  waited->wait();
  gpu().scale(y, 3.0f);  // ordered after the all-reduce by wait()
  EXPECT_EQ(floats(y)[0], 6.0f);
}

// Polling an operation that the GPU has not reached yet (test(), barrier()) answers "not ready"
// through CUDA's last-error slot; a kernel launched afterwards must not take that for its own
// failure. A few large f32 GEMMs (2 TFLOP) queued first keep the all-reduce waiting.
TEST_F(NcclCommunicatorTest, PollingUnfinishedWorkDoesNotFailTheNextKernel) {
  tensor::CudaBackend& g = gpu();
  Tensor a = g.empty({4096, 4096}, DType::F32), c = g.empty({4096, 4096}, DType::F32);
  g.fill(a, 1.0 / 4096);
  for (int i = 0; i < 16; ++i) g.gemm(a, false, a, false, c, 1.0f, 0.0f);
  Tensor x = tensor::from_floats(g, std::vector<float>{1.0f}, {1});
  auto request = comm->all_reduce_async(x);
  ASSERT_FALSE(request->test()) << "the GEMMs ended before the poll: nothing was tested";
  Tensor y = tensor::from_floats(g, std::vector<float>{2.0f}, {1});
  EXPECT_NO_THROW(g.scale(y, 3.0f));
  comm->barrier();  // polls the lanes while the GEMMs still run
  EXPECT_NO_THROW(g.scale(y, 2.0f));
  EXPECT_TRUE(request->test());
  EXPECT_EQ(floats(x)[0], float(size));
  EXPECT_EQ(floats(y)[0], 12.0f);
}

TEST_F(NcclCommunicatorTest, BarrierWaitsForOperationsInFlight) {
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{1.0f}, {1});
  auto request = comm->all_reduce_async(x);
  comm->barrier();
  EXPECT_TRUE(request->test());
  EXPECT_EQ(floats(x)[0], float(size));
}

TEST_F(NcclCommunicatorTest, SplitIntoHalvesReducesWithinEachHalf) {
  const int half = size / 2;
  const int color = rank < half ? 0 : 1;
  auto group = comm->split(color, rank, "half");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->name(), "half");
  const int first = color == 0 ? 0 : half, members = color == 0 ? half : size - half;
  EXPECT_EQ(group->size(), members);
  EXPECT_EQ(group->rank(), rank - first);
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{float(rank)}, {1});
  group->all_reduce(x);
  float expected = 0;
  for (int r = first; r < first + members; ++r) expected += float(r);
  EXPECT_EQ(floats(x)[0], expected);
  // Point-to-point inside the half, by group rank.
  if (members > 1) {
    Tensor out = tensor::from_floats(gpu(), std::vector<float>{float(rank)}, {1});
    Tensor in = gpu().empty({1}, DType::F32);
    const int g = group->rank();
    auto receiving = group->recv_async(in, (g + members - 1) % members, 0);
    group->send(out, (g + 1) % members, 0);
    receiving->wait();
    EXPECT_EQ(floats(in)[0], float(first + (g + members - 1) % members));
  }
}

TEST_F(NcclCommunicatorTest, SplitWithNoGroupLeavesThatRankOut) {
  auto group = comm->split(rank % 2 == 0 ? 0 : kNoGroup, rank, "even");
  if (rank % 2 == 1) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), (size + 1) / 2);
  Tensor x = tensor::from_ints(gpu(), std::vector<int32_t>{rank}, {1});
  group->all_reduce(x);
  int32_t expected = 0;
  for (int r = 0; r < size; r += 2) expected += r;
  EXPECT_EQ(ints(x)[0], expected);
}

TEST_F(NcclCommunicatorTest, CpuTensorsGoThroughMpi) {
  tensor::CpuBackend cpu{1};
  Tensor x = tensor::from_floats(cpu, std::vector<float>{float(rank + 1)}, {1});
  comm->all_reduce(x);
  EXPECT_EQ(tensor::to_floats(cpu, x)[0], size * (size + 1) / 2.0f);
  Tensor flag = tensor::from_ints(cpu, std::vector<int32_t>{rank}, {1});
  comm->broadcast(flag, 0);
  EXPECT_EQ(tensor::to_ints(cpu, flag)[0], 0);
  Tensor mine = tensor::from_ints(cpu, std::vector<int32_t>{rank}, {1});
  Tensor all = cpu.empty({size}, DType::I32);
  comm->all_gather(mine, all);
  EXPECT_EQ(tensor::to_ints(cpu, all)[size_t(size - 1)], size - 1);
  Tensor out = tensor::from_floats(cpu, std::vector<float>{float(rank)}, {1});
  Tensor in = cpu.empty({1}, DType::F32);
  auto receiving = comm->recv_async(in, (rank + size - 1) % size, 5);
  comm->send(out, (rank + 1) % size, 5);
  receiving->wait();
  EXPECT_EQ(tensor::to_floats(cpu, in)[0], float((rank + size - 1) % size));
}

TEST_F(NcclCommunicatorTest, MisuseThrowsBeforeAnythingIsSent) {
  tensor::CpuBackend cpu{1};
  Tensor whole = gpu().empty({size + 1}, DType::F32);
  Tensor mine = gpu().empty({1}, DType::F32);
  EXPECT_THROW(comm->reduce_scatter(whole, mine), std::logic_error);
  EXPECT_THROW(comm->all_gather(mine, whole), std::logic_error);
  Tensor host = cpu.empty({size}, DType::F32);
  EXPECT_THROW(comm->all_gather(mine, host), std::logic_error);  // mixed devices
  EXPECT_THROW(comm->send(mine, rank, 0), std::logic_error);     // to itself
  EXPECT_THROW(comm->recv(mine, size, 0), std::logic_error);     // no such rank
  EXPECT_THROW(comm->broadcast(mine, -1), std::logic_error);
  // Still usable afterwards.
  Tensor x = tensor::from_floats(gpu(), std::vector<float>{1.0f}, {1});
  comm->all_reduce(x);
  EXPECT_EQ(floats(x)[0], float(size));
}

}  // namespace
}  // namespace megatron::dist
