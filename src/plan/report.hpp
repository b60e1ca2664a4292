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

// One rank's part of the plan (`megatron plan --rank R`): its coordinates, stage, model chunks
// with their layers, and its pipeline program, the op list the engine runs on it. Throws
// UserError for a rank outside the layout.
std::string render_rank(const Plan& plan, int64_t rank);
nlohmann::json rank_to_json(const Plan& plan, int64_t rank);

}  // namespace megatron::plan
