// Fuzz target: a recipe file's bytes through the recipe compiler, then the planner and its
// text report (where sizes and counts multiply).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "plan/report.hpp"
#include "recipe/compile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  const auto file = fuzz::write_file("recipe.yaml", fuzz::as_text(data, size));
  return fuzz::expect_user_errors_only([&] {
    const recipe::CompiledRecipe compiled = recipe::compile(file);
    const plan::Plan plan = plan::make_plan(compiled, plan::find_hardware(compiled.recipe.cluster.hardware));
    plan::render_text(plan, compiled);
  });
}
