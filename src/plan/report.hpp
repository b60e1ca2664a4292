// What `megatron plan` prints: a human report in sections (layout, parameters, memory,
// compute, communication, estimate) and the same plan as JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/plan.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

std::string render_text(const Plan& plan, const recipe::CompiledRecipe& compiled);

// Sizes in bytes, FLOPs and counts as plain numbers; keys are listed in docs/plan.md.
nlohmann::json to_json(const Plan& plan, const recipe::CompiledRecipe& compiled);

}  // namespace megatron::plan
