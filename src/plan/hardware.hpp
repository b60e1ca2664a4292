// Hardware profiles for the cost model: peak FLOP/s, memory size and bandwidth, links.
// Shipped profiles: a100-80gb, h100-sxm, h200 and cpu (this project's 2-core CI machine).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace megatron::plan {

struct HardwareProfile {
  std::string name;              // "h100-sxm"
  std::string description;       // "NVIDIA H100 SXM5 80GB"
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
};

const std::vector<HardwareProfile>& hardware_profiles();
// Case-insensitive; throws UserError listing the known names when `name` is unknown.
const HardwareProfile& find_hardware(std::string_view name);

}  // namespace megatron::plan
