// Hardware profiles for the cost model: peak FLOP/s, memory size and bandwidth, links.
// Shipped profiles: a100-80gb, h100-sxm, h200 and cpu (this project's 2-core CI machine); others
// are JSON files that `megatron plan --calibrate` measures (plan/hardware_file.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plan/rate_grid.hpp"

namespace megatron::plan {

// What one dtype's kernels reach, measured (plan --calibrate) or published. Empty grids fall
// back to the profile's peak x achievable_fraction, capped by the memory roofline.
struct KernelRates {
  RateGrid gemm;                // FLOP/s at (m, n, k) of c[m, n] = a[m, k] b[k, n]
  RateGrid attention_forward;   // executed FLOP/s at (sequence, head dim): causal attention
  RateGrid attention_backward;  // executes half the score blocks of full attention
};

struct HardwareProfile {
  std::string name;              // "h100-sxm"
  std::string description;       // "NVIDIA H100 SXM5 80GB"
  std::string device = "cuda";   // the backend `megatron run` computes on here: cpu or cuda
  double peak_flops_16bit = 0;   // dense bf16/fp16 FLOP/s per device
  double peak_flops_32bit = 0;   // dense fp32 FLOP/s (TF32 where allowed) per device
  double achievable_fraction = 0;  // fraction of peak large GEMMs reach in practice
  double memory_bytes = 0;       // device memory (HBM) per device
  double memory_bandwidth = 0;   // bytes/s
  double intra_node_bandwidth = 0;  // bytes/s per device, one direction (NVLink)
  double inter_node_bandwidth = 0;  // bytes/s per device, one direction (InfiniBand)
  double dp_overlap = 0;            // fraction of data-parallel communication hidden by compute
  // Memory every rank's process takes besides tensors; 0 where not yet measured.
  double runtime_overhead_bytes = 0;
  // Fixed cost of each kernel (operation) beyond its work: launch latency, thread fork-join.
  double kernel_overhead_s = 0;
  KernelRates rates_16bit;  // bf16/f16
  KernelRates rates_32bit;  // f32 (TF32 GEMMs where allowed)
  // Where the numbers come from: "datasheet", or what calibrated them, on which host, when.
  std::string source = "datasheet";
};

const std::vector<HardwareProfile>& hardware_profiles();
// Whether a cluster.hardware value names a profile file: it ends in ".json" (any case).
bool is_profile_file(std::string_view name);
// A shipped profile by name (case-insensitive), or a profile file when `name` ends in ".json"
// (read once, then kept). Throws UserError listing the known names when `name` is unknown.
const HardwareProfile& find_hardware(std::string_view name);

}  // namespace megatron::plan
