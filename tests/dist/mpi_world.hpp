// The MPI world for the dist tests, which run as one MPI job (see tests/CMakeLists.txt): MPI
// is initialised once per process, on first use, and finalised at exit.
#pragma once

#include <memory>

#include "dist/communicator.hpp"

namespace megatron::dist {

// A new communicator over every rank of the job, named "world".
std::unique_ptr<Communicator> mpi_world();

}  // namespace megatron::dist
