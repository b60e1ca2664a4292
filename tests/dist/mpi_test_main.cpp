// main() of the dist tests: every rank runs every test, only rank 0 prints.
#include <gtest/gtest.h>

#include <chrono>

#include "dist/launcher.hpp"
#include "dist/mpi_communicator.hpp"
#include "dist/watchdog.hpp"
#include "mpi_world.hpp"

namespace megatron::dist {

std::unique_ptr<Communicator> mpi_world() {
  static MpiRuntime runtime;
  return runtime.world();
}

}  // namespace megatron::dist

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A test whose ranks disagree on a collective would block until ctest's timeout; the watchdog
  // ends it sooner and names the operation.
  megatron::dist::Watchdog::set_timeout(std::chrono::seconds(60));
  // Only rank 0 prints, so a many-rank run reads as one; every rank still fails the run.
  if (megatron::dist::launch_info().rank != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
