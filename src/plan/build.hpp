// Assembles a Plan from its parts (layout, parameters, memory, FLOPs, communication,
// schedule, estimate) without suggestions, so what-if re-runs cannot recurse.
#pragma once

#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

Plan build_plan(const recipe::CompiledRecipe& compiled, const HardwareProfile& hardware);

}  // namespace megatron::plan
