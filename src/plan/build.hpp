// Assembles a Plan from its parts (layout, layers, parameters, memory, FLOPs, communication,
// schedule, estimate) without suggestions, so what-if re-runs cannot recurse. plan/'s own: every
// job and command calls make_plan (plan/plan.hpp).
#pragma once

#include "plan/hardware.hpp"
#include "plan/placement.hpp"
#include "plan/plan.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

Plan build_plan(const recipe::CompiledRecipe& compiled, const Placement& placement,
                const HardwareProfile& hardware);

}  // namespace megatron::plan
