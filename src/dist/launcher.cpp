#include "dist/launcher.hpp"

#include <cstdlib>

namespace megatron::dist {
namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

}  // namespace

LaunchInfo launch_info() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    return {.rank = env_int("OMPI_COMM_WORLD_RANK", 0),
            .world_size = env_int("OMPI_COMM_WORLD_SIZE", 1),
            .local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0),
            .launcher = "mpirun"};
  }
  // The step's task count, not the allocation's: a batch script's own shell has SLURM_NTASKS
  // and SLURM_PROCID=0 but is one process.
  if (std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_NUM_TASKS")) {
    return {.rank = env_int("SLURM_PROCID", 0),
            .world_size = env_int("SLURM_STEP_NUM_TASKS", 1),
            .local_rank = env_int("SLURM_LOCALID", 0),
            .launcher = "srun"};
  }
  // MPICH's and Intel MPI's launchers (Hydra) set the PMI variables only.
  if (std::getenv("PMI_RANK") && std::getenv("PMI_SIZE")) {
    return {.rank = env_int("PMI_RANK", 0),
            .world_size = env_int("PMI_SIZE", 1),
            .local_rank = env_int("MPI_LOCALRANKID", 0),
            .launcher = "mpirun"};
  }
  return {};
}

}  // namespace megatron::dist
