// `megatron plan --calibrate` as a job: start the ranks' backend and world, measure this machine
// from a datasheet profile, and write the calibrated profile file (rank 0 writes).
#pragma once

#include <string>

#include "tensor/dtype.hpp"

namespace megatron::train {

struct CalibrationJob {
  std::string base = "cpu";  // the datasheet profile to start from (plan::find_hardware)
  std::string device;        // "cpu" or "cuda"; empty: cpu for the cpu profile, else cuda
  int threads = 0;           // cpu threads; 0: OMP_NUM_THREADS, else every core
  bool quick = false;        // CalibrationOptions::quick
  std::string output;        // the profile file to write
};

// Every rank of an mpirun job takes part in the collectives; returns the written file's path.
std::string calibrate_to_file(const CalibrationJob& job);

}  // namespace megatron::train
