// `megatron plan RECIPE [overrides] [--nodes N --gpus-per-node G] [--hardware NAME] [--rank R]
// [--json]`
#include <iostream>

#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "plan/report.hpp"

#include <nlohmann/json.hpp>
#include "recipe/compile.hpp"
#include "recipe/schema.hpp"

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
};

void run_plan(const PlanArgs& args) {
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
  cmd->add_option("recipe", args->file, "Recipe YAML file")->required();
  cmd->add_option("overrides", args->overrides, "section.key=value overrides");
  // Validators run on the text before CLI11 converts it, so a number past int64 is refused
  // here too instead of wrapping.
  cmd->add_option("--nodes", args->nodes, "Nodes (overrides cluster.nodes)")
      ->check(like_key("cluster.nodes"));
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "GPUs per node (overrides cluster.gpus_per_node)")
      ->check(like_key("cluster.gpus_per_node"));
  cmd->add_option("--hardware", args->hardware,
                  "Hardware profile: a100-80gb, h100-sxm, h200 or cpu (overrides "
                  "cluster.hardware)");
  cmd->add_option("--rank", args->rank,
                  "Show one rank instead: its coordinates, model chunks and layers, and the "
                  "pipeline program (forward and backward passes in order) it runs")
      ->check(rank_number());
  cmd->add_flag("--json", args->json, "Machine-readable output (with --rank: the plan plus a "
                                      "\"rank\" object)");
  actions.emplace_back(cmd, [args] { run_plan(*args); });
}

}  // namespace megatron::cli
