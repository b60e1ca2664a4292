// The fault drill: a few "iterations" of an all-reduce over every rank, with MEGATRON_FAULT
// injected as the trainer does. ctest runs it under mpiexec (tests/CMakeLists.txt) to show that
// when one rank hangs the others end with the watchdog's message instead of waiting forever.
//
//   usage: dist_fault_drill <watchdog timeout, ms> <iterations>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/error.hpp"
#include "dist/fault_injection.hpp"
#include "dist/mpi_communicator.hpp"
#include "dist/watchdog.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

int main(int argc, char** argv) {
  using namespace megatron;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <watchdog timeout, ms> <iterations>\n", argv[0]);
    return kExitBadInput;
  }
  try {
    dist::MpiRuntime runtime;
    auto world = runtime.world();
    // A group of its own name, so the message shows that it names the group, not the world.
    auto dp = world->split(0, world->rank(), "dp");
    dist::Watchdog::set_timeout(std::chrono::milliseconds(std::atol(argv[1])));
    tensor::CpuBackend backend{1};
    const int64_t iterations = std::atol(argv[2]);
    for (int64_t it = 1; it <= iterations; ++it) {
      dist::set_current_iteration(it);
      dist::inject_fault(world->rank(), it);
      tensor::Tensor x = tensor::from_floats(backend, std::vector<float>{1.0f}, {1});
      dp->all_reduce(x);
      if (tensor::to_floats(backend, x)[0] != float(dp->size())) return kExitRuntimeFailure;
    }
    std::printf("rank %d: completed %lld iterations\n", world->rank(),
                static_cast<long long>(iterations));
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "megatron: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megatron: error: %s\n", e.what());
    return kExitRuntimeFailure;
  }
}
