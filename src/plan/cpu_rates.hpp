// The rate grids of the shipped cpu profile, measured on this project's CI machine with
// `megatron plan --calibrate` (regenerate them the same way after changing the CPU kernels).
#pragma once

#include "plan/hardware.hpp"

namespace megatron::plan {

KernelRates cpu_rates_32bit();
KernelRates cpu_rates_16bit();

}  // namespace megatron::plan
