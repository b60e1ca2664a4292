// make_plan: the planner's entry point; the work is in build.cpp and the files it calls.
#include "plan/plan.hpp"

#include "plan/build.hpp"
#include "plan/suggestions.hpp"

namespace megatron::plan {

Plan make_plan(const recipe::CompiledRecipe& compiled, const HardwareProfile& hardware) {
  Plan plan = build_plan(compiled, hardware);
  if (!plan.estimate.fits) plan.estimate.suggestions = suggest_fixes(compiled, hardware, plan);
  return plan;
}

}  // namespace megatron::plan
