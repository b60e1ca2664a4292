// The Communicator over MPI (Open MPI) for CPU tensors. MPI is initialised once per process by
// MpiRuntime; a job started without a launcher is a world of one and never touches MPI.
#pragma once

#include <memory>

#include "dist/communicator.hpp"

namespace megatron::dist {

// Initialises MPI on construction (threads: funneled) and finalises it on destruction.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  // The communicator over every rank of the job; it also tells the watchdog (watchdog.hpp),
  // which watches every blocking operation of the MPI communicators, this process's rank.
  std::unique_ptr<Communicator> world() const;
};

}  // namespace megatron::dist
