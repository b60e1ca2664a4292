// Predicted step time, throughput and MFU of a plan on a hardware profile, and whether its
// busiest stage fits in device memory. Formulas: docs/plan.md, "Estimate".
#pragma once

#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "plan/shape.hpp"
#include "plan/stages.hpp"

namespace megatron::plan {

// Needs every other part of `plan` filled. Leaves suggestions empty (see suggestions.hpp).
Estimate make_estimate(const ModelShape& x, const Chunks& chunks, const Plan& plan,
                       const HardwareProfile& hardware);

}  // namespace megatron::plan
