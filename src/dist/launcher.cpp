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
  if (std::getenv("SLURM_PROCID") && std::getenv("SLURM_NTASKS")) {
    return {.rank = env_int("SLURM_PROCID", 0),
            .world_size = env_int("SLURM_NTASKS", 1),
            .local_rank = env_int("SLURM_LOCALID", 0),
            .launcher = "srun"};
  }
  return {};
}

}  // namespace megatron::dist
