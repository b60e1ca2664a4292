// What the launcher told this process: its rank, the world size and the local rank on its node,
// read from the environment mpirun (Open MPI) or Slurm's srun set. No launcher: one rank.
#pragma once

#include <string>

namespace megatron::dist {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string launcher = "none";  // "mpirun", "srun" or "none"
};

LaunchInfo launch_info();

}  // namespace megatron::dist
