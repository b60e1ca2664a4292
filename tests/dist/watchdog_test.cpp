// The watchdog's message and its bookkeeping. That it fires (prints and exits) is shown by the
// fault drill under mpiexec (fault_drill.cpp, run by ctest), as a firing watchdog ends the process.
#include "dist/watchdog.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "mpi_world.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::dist {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Watchdog, MessageNamesRankGroupOperationIterationAndRemedy) {
  EXPECT_EQ(
      timeout_message(3, {.op = "all_reduce", .group = "dp", .group_size = 2}, seconds(30), 7),
      "megatron: error: rank 3: all_reduce on group dp (2 ranks) did not complete within "
      "30 s at iteration 7: a peer rank died or is stuck; see the other ranks' messages, or "
      "raise parallel.timeout_minutes");
}

TEST(Watchdog, MessageNamesThePeerOfATransferAndStartUp) {
  const std::string line = timeout_message(
      0, {.op = "send to", .peer = 1, .group = "pp", .group_size = 4}, std::chrono::minutes(10), 0);
  EXPECT_NE(line.find("rank 0: send to rank 1 on group pp (4 ranks) did not complete within "
                      "10 min during start-up: "),
            std::string::npos)
      << line;
}

TEST(Watchdog, MessageWritesFractionsOfSeconds) {
  const std::string line = timeout_message(1, {.op = "barrier", .group = "world", .group_size = 1},
                                           milliseconds(1500), 2);
  EXPECT_NE(line.find("barrier on group world (1 rank) did not complete within 1.5 s at "
                      "iteration 2"),
            std::string::npos)
      << line;
}

TEST(Watchdog, TimeoutIsSettable) {
  const milliseconds before = Watchdog::timeout();
  Watchdog::set_timeout(seconds(42));
  EXPECT_EQ(Watchdog::timeout(), seconds(42));
  Watchdog::set_timeout(before);
}

// A scope left marked in flight would make the watchdog end this process during the sleep, as
// the shortened timeout applies to operations already in flight.
void expect_nothing_left_in_flight() {
  const milliseconds before = Watchdog::timeout();
  Watchdog::set_timeout(milliseconds(100));
  std::this_thread::sleep_for(milliseconds(400));
  Watchdog::set_timeout(before);
}

TEST(Watchdog, ClosedScopesLeaveNothingInFlight) {
  {
    WatchdogScope outer({.op = "all_reduce", .group = "tp", .group_size = 2});
    WatchdogScope inner({.op = "all_reduce", .group = "tp", .group_size = 2});
  }
  expect_nothing_left_in_flight();
}

TEST(Watchdog, CompletedCommunicationLeavesNothingInFlight) {
  std::unique_ptr<Communicator> comm = mpi_world();
  tensor::CpuBackend backend{1};
  tensor::Tensor x = tensor::from_floats(backend, std::vector<float>{1.0f}, {1});
  comm->all_reduce(x);
  comm->all_reduce_async(x)->wait();
  comm->barrier();
  expect_nothing_left_in_flight();
  comm->barrier();
}

}  // namespace
}  // namespace megatron::dist
