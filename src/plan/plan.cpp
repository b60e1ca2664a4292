// make_plan: the planner's entry point; the work is in build.cpp and the files it calls.
#include "plan/plan.hpp"

#include <string>

#include "core/error.hpp"
#include "plan/build.hpp"
#include "plan/placement.hpp"
#include "plan/suggestions.hpp"
#include "recipe/checks.hpp"

namespace megatron::plan {

Plan make_plan(const recipe::CompiledRecipe& compiled, const HardwareProfile& hardware) {
  const Placement placement = place(compiled);
  Plan plan;
  try {
    plan = build_plan(compiled, placement, hardware);
  } catch (const UserError& e) {
    // The planner's only errors are checked products of the model's sizes that pass 64 bits;
    // the hidden size is in all of them, so that is the line to point at.
    const recipe::Locator where(compiled.provenance, compiled.file);
    recipe::fail_at(where.at("model.hidden_size"),
                    std::string(e.what()) +
                        "; make model.hidden_size, ffn_hidden_size, vocab_size or num_layers "
                        "smaller");
  }
  if (!plan.estimate.fits) plan.estimate.suggestions = suggest_fixes(compiled, hardware, plan);
  return plan;
}

}  // namespace megatron::plan
