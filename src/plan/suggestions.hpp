// What-if re-plans for a plan that does not fit: each candidate change (distributed optimizer,
// recompute, more pipeline or tensor parallelism, sequence parallelism) is planned again.
#pragma once

#include <string>
#include <vector>

#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

// One line per change that lowers the peak per-rank memory, as a recipe override with the
// peak it would give: "parallel.distributed_optimizer=true (stage 0: 61.3 GiB)".
std::vector<std::string> suggest_fixes(const recipe::CompiledRecipe& compiled,
                                       const HardwareProfile& hardware, const Plan& plan);

}  // namespace megatron::plan
