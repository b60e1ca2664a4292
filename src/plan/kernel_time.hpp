// How long a stage's kernels take on a hardware profile: measured rates where the profile has
// them (plan --calibrate), else its peak x achievable_fraction capped by the memory roofline.
#pragma once

#include "plan/hardware.hpp"
#include "plan/stage_work.hpp"

namespace megatron::plan {

double gemm_seconds(const HardwareProfile& hw, const GemmWork& gemm, bool sixteen_bit);
double attention_forward_seconds(const HardwareProfile& hw, const AttentionWork& attention,
                                 bool sixteen_bit);
double attention_backward_seconds(const HardwareProfile& hw, const AttentionWork& attention,
                                  bool sixteen_bit);

struct StageTime {
  double gemm = 0, attention = 0, memory = 0, overhead = 0;  // per micro-batch
  double optimizer = 0;                                      // per iteration
  double per_microbatch() const { return gemm + attention + memory + overhead; }
};

StageTime stage_time(const HardwareProfile& hw, const StageWork& work, bool sixteen_bit);

}  // namespace megatron::plan
