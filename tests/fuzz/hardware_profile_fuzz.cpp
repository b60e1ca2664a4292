// Fuzz target: a hardware profile file (`--hardware FILE.json`, cluster.hardware), read and, when
// it passes its checks, used to plan gpt-tiny, so every accepted profile's rate grids and
// numbers go through the cost model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "plan/hardware_file.hpp"
#include "plan/plan.hpp"
#include "recipe/compile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  static const recipe::CompiledRecipe tiny =
      recipe::compile(std::string(MEGATRON_SOURCE_DIR) + "/recipes/gpt-tiny.yaml");
  const auto path = fuzz::scratch() / "profile.json";
  fuzz::write_file("profile.json", fuzz::as_text(data, size));
  return fuzz::expect_user_errors_only([&] {
    const plan::HardwareProfile profile = plan::read_hardware_file(path.string());
    plan::make_plan(tiny, profile);
  });
}
