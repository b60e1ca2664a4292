// `megatron plan --calibrate`: measures what this machine's kernels reach (GEMMs by shape,
// attention, memory bandwidth, per-kernel overhead, collectives) as a hardware profile.
#pragma once

#include <functional>
#include <string>

#include "dist/communicator.hpp"
#include "plan/hardware.hpp"
#include "tensor/backend.hpp"

namespace megatron::train {

struct CalibrationOptions {
  bool quick = false;  // a 2-point grid per axis: seconds instead of a minute (tests, a first look)
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

// The sizes each grid measures on a device (docs/plan.md, "Calibration").
struct CalibrationGrid {
  std::vector<double> gemm_sizes;  // m, n and k each take every value
  std::vector<double> attention_seqs;
  std::vector<double> attention_head_dims;
};
CalibrationGrid calibration_grid(tensor::Device device, bool quick);

// Runs the measurements on `backend` (and the collectives over `world` when it has more than one
// rank; every rank must call this) and returns `base` with the measured fields replaced: both
// dtypes' rate grids, memory_bandwidth, kernel_overhead_s, achievable_fraction (the best GEMM
// rate over the peak) and, with several ranks, the link bandwidth they share.
plan::HardwareProfile calibrate(const plan::HardwareProfile& base, tensor::Backend& backend,
                                dist::Communicator* world, const CalibrationOptions& options);

}  // namespace megatron::train
