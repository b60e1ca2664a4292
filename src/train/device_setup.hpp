// Which device a run computes on, its Backend, and the world communicator that fits it: MPI
// between CPU ranks, NCCL (bootstrapped over MPI) between GPU ranks, nothing for one rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dist/communicator.hpp"
#include "dist/mpi_communicator.hpp"
#include "recipe/recipe.hpp"
#include "tensor/backend.hpp"

namespace megatron::train {

// The index of this rank's GPU: local_rank % the devices visible (0 on the cpu).
int run_cuda_device(const recipe::Recipe& r, int local_rank);

// The backend for this rank: on cuda, the GPU of its local rank (local_rank % device count).
std::unique_ptr<tensor::Backend> make_run_backend(const recipe::Recipe& r, int threads,
                                                  int local_rank);

// The world of this job: `mpi` is null for a single process.
std::unique_ptr<dist::Communicator> make_world(dist::MpiRuntime* mpi, tensor::Backend& backend);

}  // namespace megatron::train
