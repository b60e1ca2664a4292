// `megatron run RECIPE [overrides] [--run-dir DIR] [--threads N] [--time-limit MINUTES]`
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "recipe/compile.hpp"
#include "train/trainer.hpp"

namespace megatron::cli {
namespace {

struct RunArgs {
  std::string file;
  std::vector<std::string> overrides;
  std::string run_dir;
  int threads = 0;
  std::optional<double> time_limit;
};

void run(const RunArgs& args) {
  recipe::CompileOptions options{.overrides = args.overrides, .world_size = 1};
  if (args.time_limit) {
    options.overrides.push_back("training.exit_duration_minutes=" + std::to_string(*args.time_limit));
  }
  const recipe::CompiledRecipe compiled = recipe::compile(args.file, options);
  train::TrainOptions train_options{.threads = args.threads};
  if (!args.run_dir.empty()) train_options.run_dir = args.run_dir;
  std::ifstream in(args.file);
  std::stringstream text;
  text << in.rdbuf();
  train_options.recipe_text = text.str();
  train::train(compiled, train_options);
}

}  // namespace

void add_run_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Train the model a recipe describes");
  cmd->add_option("recipe", args->file, "Recipe YAML file")->required();
  cmd->add_option("overrides", args->overrides, "section.key=value overrides");
  cmd->add_option("--run-dir", args->run_dir,
                  "Where metrics.jsonl and the resolved recipe go (overrides logging.run_dir; "
                  "default runs/<recipe>/<time>)");
  cmd->add_option("--threads", args->threads,
                  "CPU threads (default: OMP_NUM_THREADS, else every core); results do not "
                  "depend on it")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--time-limit", args->time_limit,
                  "Stop after this many minutes (overrides training.exit_duration_minutes)")
      ->check(CLI::PositiveNumber);
  actions.emplace_back(cmd, [args] { run(*args); });
}

}  // namespace megatron::cli
