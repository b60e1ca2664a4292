// Fuzz target: command-line overrides (one per input line) on a shipped recipe, compiled and
// planned: the path every `megatron plan R key=value` and `run` takes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "plan/report.hpp"
#include "recipe/compile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  std::vector<std::string> overrides;
  std::string line;
  for (char c : fuzz::as_text(data, size)) {
    if (c == '\n') {
      overrides.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) overrides.push_back(line);
  return fuzz::expect_user_errors_only([&] {
    const recipe::CompiledRecipe compiled = recipe::compile(
        std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-175b.yaml", {.overrides = overrides});
    const plan::Plan plan = plan::make_plan(compiled, plan::find_hardware(compiled.recipe.cluster.hardware));
    plan::render_text(plan, compiled);
    plan::to_json(plan, compiled).dump();
  });
}
