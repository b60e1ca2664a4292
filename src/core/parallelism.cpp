#include "core/parallelism.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace megatron {

unsigned usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int max_parallelism() { return std::clamp(4 * int(usable_cores()), 64, 1024); }

}  // namespace megatron
