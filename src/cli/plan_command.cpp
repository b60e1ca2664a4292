// `megatron plan RECIPE [overrides] [--nodes N --gpus-per-node G] [--hardware NAME|FILE.json]
// [--rank R] [--json]`, and `megatron plan [RECIPE] --calibrate [--output FILE] [--device D]
// [--threads N] [--quick]`, which measures this machine into a hardware profile file first.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "dist/launcher.hpp"
#include "plan/engine_support.hpp"
#include "plan/hardware.hpp"
#include "plan/hardware_file.hpp"
#include "plan/plan.hpp"
#include "plan/report.hpp"
#include "recipe/compile.hpp"
#include "train/calibration_job.hpp"

namespace megatron::cli {
namespace {

struct PlanArgs {
  std::string file;
  std::vector<std::string> overrides;
  std::optional<int64_t> nodes;
  std::optional<int64_t> gpus_per_node;
  std::optional<std::string> hardware;
  std::optional<int64_t> rank;
  bool json = false;
  bool calibrate = false;
  std::optional<std::string> output;
  std::string device;
  int threads = 0;
  bool quick = false;
  bool force = false;
};

// Refuses misused flags, and a profile that could not be written, before anything is measured.
// Returns where --calibrate writes.
std::string check_calibration_flags(const PlanArgs& args) {
  const std::pair<bool, const char*> flags[] = {{args.output.has_value(), "--output"},
                                                {!args.device.empty(), "--device"},
                                                {args.threads != 0, "--threads"},
                                                {args.quick, "--quick"},
                                                {args.force, "--force"}};
  for (const auto& [given, flag] : flags)
    if (given && !args.calibrate)
      throw UserError(std::string("plan: ") + flag + " goes with --calibrate");
  if (args.calibrate && args.file.empty() &&
      (args.rank || !args.overrides.empty() || args.nodes || args.gpus_per_node || args.json))
    throw UserError("plan: overrides, --nodes, --gpus-per-node, --rank and --json need a recipe");
  if (args.output && !plan::is_profile_file(*args.output))
    throw UserError("plan: --output " + *args.output + ": a hardware profile file's name ends "
                    "in .json (so that cluster.hardware tells it from a profile's name)");
  const std::string output = args.output.value_or("hardware.json");
  if (!args.calibrate) return output;
  if (std::filesystem::is_directory(output))
    throw UserError("plan: --output " + output + " is a directory; name the profile file to "
                    "write in it");
  if (!args.force && std::filesystem::exists(output))
    throw UserError("plan: " + output + " exists; --force replaces it (or choose another "
                    "--output)");
  if (dist::launch_info().rank == 0) {
    const std::string dir = std::filesystem::path(output).parent_path().string();
    prepare_output_dir("--output", dir.empty() ? "." : dir);
  }
  return output;
}

void run_plan(PlanArgs args) {
  const std::string output = check_calibration_flags(args);
  if (args.calibrate) {
    const std::string written = train::calibrate_to_file({.base = args.hardware.value_or("cpu"),
                                                          .device = args.device,
                                                          .threads = args.threads,
                                                          .quick = args.quick,
                                                          .output = output});
    if (args.file.empty() || dist::launch_info().rank != 0) return;
    args.hardware = written;
  } else if (args.file.empty()) {
    throw UserError("plan: a recipe is required (or --calibrate, to measure this machine)");
  }
  recipe::CompileOptions options;
  options.overrides = args.overrides;
  // Flags are overrides too, applied last, so `recipe show` and errors name them.
  if (args.nodes) options.overrides.push_back("cluster.nodes=" + std::to_string(*args.nodes));
  if (args.gpus_per_node)
    options.overrides.push_back("cluster.gpus_per_node=" + std::to_string(*args.gpus_per_node));
  if (args.hardware) options.overrides.push_back("cluster.hardware=" + *args.hardware);
  const auto compiled = recipe::compile(args.file, options);

  const plan::HardwareProfile* hardware = nullptr;
  try {
    hardware = &plan::find_hardware(compiled.recipe.cluster.hardware);
  } catch (const UserError& e) {
    auto it = compiled.provenance.find("cluster.hardware");
    throw UserError(it == compiled.provenance.end() ? e.what()
                                                    : it->second.describe() + ": " + e.what());
  }
  plan::check_engine_support(compiled);
  const plan::Plan plan = plan::make_plan(compiled, *hardware);
  if (args.rank && args.json) {
    nlohmann::json out = plan::to_json(plan, compiled);
    out["rank"] = plan::rank_to_json(plan, *args.rank);
    std::cout << out.dump(2) << "\n";
  } else if (args.rank)
    std::cout << plan::render_rank(plan, *args.rank);
  else if (args.json)
    std::cout << plan::to_json(plan, compiled).dump(2) << "\n";
  else
    std::cout << plan::render_text(plan, compiled);
}

}  // namespace

void add_plan_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Show how a recipe runs without running it: layout, parameters, memory per rank, "
              "FLOPs, communication, predicted step time");
  cmd->add_option("recipe", args->file, "Recipe YAML file");
  cmd->add_option("overrides", args->overrides, "section.key=value overrides");
  // Validators run on the text before CLI11 converts it, so a number past int64 is refused
  // here too instead of wrapping.
  cmd->add_option("--nodes", args->nodes, "Nodes (overrides cluster.nodes)")
      ->check(like_key("cluster.nodes"));
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "GPUs per node (overrides cluster.gpus_per_node)")
      ->check(like_key("cluster.gpus_per_node"));
  cmd->add_option("--hardware", args->hardware,
                  "Hardware profile: a100-80gb, h100-sxm, h200, cpu, or a FILE.json from "
                  "--calibrate (overrides cluster.hardware; with --calibrate, the datasheet "
                  "profile to start from, default cpu)");
  cmd->add_flag("--calibrate", args->calibrate,
                "Measure this machine first (GEMMs by shape, attention, memory bandwidth, "
                "kernel overhead; collectives when launched on several ranks) into a hardware "
                "profile file (--output), then plan RECIPE with it if one is given");
  cmd->add_option("--output", args->output,
                  "With --calibrate: the profile file to write (default hardware.json)");
  cmd->add_option("--device", args->device,
                  "With --calibrate: measure the cpu or cuda backend (default: cpu for the cpu "
                  "profile, else cuda)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--threads", args->threads,
                  "With --calibrate on the cpu: threads (default OMP_NUM_THREADS, else every "
                  "core)")
      ->check(parallelism("--threads"));
  cmd->add_flag("--force", args->force,
                "With --calibrate: replace an existing --output file");
  cmd->add_flag("--quick", args->quick,
                "With --calibrate: a small grid in seconds (a first look; tests)");
  cmd->add_option("--rank", args->rank,
                  "Show one rank instead: its coordinates, model chunks and layers, and the "
                  "pipeline program (forward and backward passes in order) it runs")
      ->check(rank_number());
  cmd->add_flag("--json", args->json, "Machine-readable output (with --rank: the plan plus a "
                                      "\"rank\" object)");
  actions.emplace_back(cmd, [args] { run_plan(*args); });
}

}  // namespace megatron::cli
