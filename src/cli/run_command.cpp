// `megatron run RECIPE [overrides] [--run-dir DIR] [--threads N] [--time-limit MINUTES]
// [--nproc N]`: one process, one rank of an mpirun / srun job, or (--nproc) a local job of N.
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ckpt/directory.hpp"
#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallelism.hpp"
#include "core/printable.hpp"
#include "dist/launcher.hpp"
#include "launch/local_job.hpp"
#include "launch/run_dir.hpp"
#include "plan/engine_support.hpp"
#include "recipe/compile.hpp"
#include "recipe/smoke.hpp"
#include "train/trainer.hpp"

namespace megatron::cli {
namespace {

struct RunArgs {
  std::string file;
  std::vector<std::string> overrides;
  std::string run_dir;
  int threads = 0;
  std::optional<double> time_limit;
  int nproc = 0;
  std::string device;
  bool force = false;
  bool smoke = false;
  int stopped_exit_code = 0;
  bool profile = false;
  std::string profile_steps;  // "A:B"
  std::vector<int64_t> profile_ranks;
};

// --profile, --profile-steps A:B and --profile-ranks are logging.profile's keys as overrides, so
// that every rank of a job and the saved recipe see them; steps or ranks imply --profile.
void add_profile_overrides(RunArgs& args) {
  if (!args.profile_steps.empty()) {
    const size_t colon = args.profile_steps.find(':');
    const auto number = [&](std::string_view text) {
      int64_t v = 0;
      const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (err != std::errc() || end != text.data() + text.size() || text.empty() || v < 1)
        throw UserError(fmt::format("--profile-steps {}: expected START:END, iterations from 1 "
                                    "with END after START (e.g. 10:12 profiles 10 and 11)",
                                    args.profile_steps));
      return v;
    };
    if (colon == std::string::npos) number("");
    const std::string_view text(args.profile_steps);
    args.overrides.push_back("logging.profile_step_start=" + std::to_string(number(text.substr(0, colon))));
    args.overrides.push_back("logging.profile_step_end=" + std::to_string(number(text.substr(colon + 1))));
    args.profile = true;
  }
  if (!args.profile_ranks.empty()) {
    std::string list;
    for (int64_t r : args.profile_ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
    args.overrides.push_back("logging.profile_ranks=[" + list + "]");
    args.profile = true;
  }
  if (args.profile) args.overrides.push_back("logging.profile=true");
}

// Replaces this process with `mpirun -np N megatron run ...` (the same arguments but --nproc),
// after the recipe compiled for N ranks: a bad layout is refused before any rank starts.
[[noreturn]] void launch_local_job(const RunArgs& args, const recipe::CompiledRecipe& compiled) {
  const int threads = launch::threads_per_rank(args.threads, args.nproc);
  // Every rank must agree on the run directory, so it is settled here, once.
  const std::string run_dir =
      train::run_dir_for(compiled, args.run_dir.empty() ? std::nullopt
                                                         : std::optional<std::filesystem::path>(args.run_dir))
          .string();
  std::vector<std::string> argv;
  argv.push_back("run");
  argv.push_back(args.file);
  argv.insert(argv.end(), args.overrides.begin(), args.overrides.end());
  for (const std::string& a : {std::string("--run-dir"), run_dir, std::string("--threads"),
                               std::to_string(threads)}) {
    argv.push_back(a);
  }
  if (args.time_limit) {
    argv.push_back("--time-limit");
    argv.push_back(fmt::format("{}", *args.time_limit));
  }
  if (args.stopped_exit_code != 0) {
    argv.push_back("--stopped-exit-code");
    argv.push_back(std::to_string(args.stopped_exit_code));
  }
  // The run directory was checked here, before any rank started.
  argv.push_back("--force");
  launch::exec_local_job(args.nproc, argv);
}

// A single process whose recipe's layout wants more ranks is told how to start them.
void require_one_rank(const std::string& file, const recipe::CompileOptions& options) {
  recipe::CompileOptions own = options;
  own.world_size.reset();
  own.world_from_layout = true;
  const recipe::CompiledRecipe wanted = recipe::compile(file, own);
  if (wanted.world_size != 1) throw train::wrong_rank_count(wanted, 1);
}

void run(RunArgs args) {
  add_profile_overrides(args);
  if (args.smoke) {
    if (args.nproc > 1) throw UserError("--smoke runs on one process: drop --nproc");
    // The recipe as the user gave it decides what its smoke run keeps.
    const recipe::CompiledRecipe as_given = recipe::compile(
        args.file, recipe::CompileOptions{.overrides = args.overrides, .world_from_layout = true});
    for (std::string& o : recipe::smoke_overrides(as_given.recipe)) args.overrides.push_back(std::move(o));
    if (const auto& pretrained = as_given.recipe.finetune.pretrained) {
      spdlog::warn("--smoke: finetune.pretrained ({}) is not loaded: its weights do not fit the "
                   "shrunk model, so fine-tuning starts from random weights",
                   printable(*pretrained));
    }
  }
  // --device is cluster.device, so mpirun's ranks and the saved recipe see it as an override.
  if (!args.device.empty()) args.overrides.push_back("cluster.device=" + args.device);
  const int world = launch::job_world_size(args.nproc);
  const dist::LaunchInfo launch = dist::launch_info();
  recipe::CompileOptions options{.overrides = args.overrides, .world_size = world};
  if (args.time_limit) {
    options.overrides.push_back("training.exit_duration_minutes=" + std::to_string(*args.time_limit));
  }
  if (world == 1) require_one_rank(args.file, options);
  const recipe::CompiledRecipe compiled = recipe::compile(args.file, options);
  // What the engine cannot run is refused here, once, before any rank starts (as `plan` does).
  plan::check_engine_support(compiled);
  if (launch.rank == 0 && !args.force) {
    const std::string dir = !args.run_dir.empty() ? args.run_dir : compiled.recipe.logging.run_dir.value_or("");
    // The default is a new directory named for the time.
    if (!dir.empty()) launch::refuse_earlier_run_dir(dir, compiled);
  }
  if (args.nproc > 1) launch_local_job(args, compiled);
  train::TrainOptions train_options{.threads = args.threads, .overrides = args.overrides};
  if (!args.run_dir.empty()) train_options.run_dir = args.run_dir;
  std::ifstream in(args.file);
  std::stringstream text;
  text << in.rdbuf();
  train_options.recipe_text = text.str();
  const train::TrainResult result = train::train(compiled, train_options);
  if (result.stopped_with_checkpoint && args.stopped_exit_code != 0)
    throw ExitCode{args.stopped_exit_code};
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
      ->check(parallelism("threads"));
  cmd->add_option("--time-limit", args->time_limit,
                  "Stop after this many minutes (overrides training.exit_duration_minutes)")
      ->check(positive_number());
  cmd->add_option("--device", args->device,
                  "Compute on the cpu or on cuda GPUs, one per rank (overrides cluster.device; "
                  "default auto: cpu when cluster.hardware is cpu, else cuda)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--nproc", args->nproc,
                  "Start a local job of this many ranks (mpirun -np N) for the recipe's layout")
      ->check(parallelism("processes"));
  cmd->add_flag("--smoke", args->smoke,
                "Check the recipe on this CPU: its model shrunk to 2 layers of width 64, one "
                "rank, mock data, 3 iterations, no checkpoints (see docs/training.md)");
  cmd->add_option("--stopped-exit-code", args->stopped_exit_code,
                  "Exit with this code instead of 0 when a stop signal or the time limit ended "
                  "training before its end after saving a checkpoint (megatron submit's batch "
                  "script requeues the job on it)")
      ->check(CLI::Range(3, 125));
  cmd->add_flag("--profile", args->profile,
                "Time every backend op of some iterations and write the per-op table and a "
                "Chrome trace into the run directory's profile/ (logging.profile; "
                "docs/profiling.md)");
  cmd->add_option("--profile-steps", args->profile_steps,
                  "Profile iterations START up to, not including, END (logging.profile_step_start "
                  "and profile_step_end; default 10:12)");
  cmd->add_option("--profile-ranks", args->profile_ranks,
                  "Global ranks that profile, comma-separated (logging.profile_ranks; default 0)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cmd->add_flag("--force", args->force,
                "Write into a run directory that holds an earlier run's metrics (appending to "
                "metrics.jsonl) although this run does not resume from its checkpoint");
  actions.emplace_back(cmd, [args] {
    logging::log_to_stdout();
    run(*args);
  });
}

}  // namespace megatron::cli
