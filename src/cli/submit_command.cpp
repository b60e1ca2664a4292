// `megatron submit RECIPE [overrides] [--run-dir DIR] [--dry-run | --test-only]`: compiles the
// recipe for its cluster section's nodes x GPUs, writes the batch script into the run
// directory and hands it to sbatch (docs/slurm.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "launch/local_job.hpp"
#include "launch/run_dir.hpp"
#include "launch/sbatch_script.hpp"
#include "launch/subprocess.hpp"
#include "plan/engine_support.hpp"
#include "recipe/compile.hpp"
#include "train/trainer.hpp"

namespace megatron::cli {
namespace {

namespace fs = std::filesystem;

struct SubmitArgs {
  std::string file;
  std::vector<std::string> overrides;
  std::string run_dir;
  bool dry_run = false;
  bool test_only = false;
};

// sbatch takes an #SBATCH value up to the first space, and expands % in --output.
void require_plain_path(const fs::path& path, const std::string& what) {
  const std::string text = path.string();
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '%' || std::iscntrl(static_cast<unsigned char>(c)))
      throw UserError(fmt::format("{} '{}' holds a space, a % or a control character, which an "
                                  "#SBATCH line cannot carry: choose a path without them",
                                  what, printable(text)));
  }
}

// Tools print their answer last (sbatch --test-only, --parsable).
std::string last_line(const std::string& text) {
  const std::string trimmed = text.substr(0, text.find_last_not_of(" \n\r\t") + 1);
  const size_t end = trimmed.find_last_of('\n');
  return end == std::string::npos ? trimmed : trimmed.substr(end + 1);
}

launch::ProcessResult sbatch(const std::vector<std::string>& argv) {
  const std::optional<launch::ProcessResult> result = launch::run_process(argv);
  if (!result)
    throw UserError("sbatch was not found on PATH: megatron submit runs on a Slurm login node "
                    "(megatron submit --dry-run prints the script without Slurm)");
  return *result;
}

std::string command_line(const SubmitArgs& args) {
  std::string line = "megatron submit " + launch::shell_quote(args.file);
  for (const std::string& o : args.overrides) line += " " + launch::shell_quote(o);
  if (!args.run_dir.empty()) line += " --run-dir " + launch::shell_quote(args.run_dir);
  // One comment line: a line break in an override must not end it.
  for (char& c : line)
    if (std::iscntrl(static_cast<unsigned char>(c))) c = '?';
  return line;
}

void submit(const SubmitArgs& args) {
  if (args.dry_run && args.test_only) throw UserError("give --dry-run or --test-only, not both");
  // The world is the cluster section's nodes x GPUs per node: the layout must fill it.
  const recipe::CompiledRecipe compiled =
      recipe::compile(args.file, recipe::CompileOptions{.overrides = args.overrides});
  // What `megatron run` would refuse is refused before it waits in the queue.
  plan::check_engine_support(compiled);
  const recipe::Recipe& r = compiled.recipe;
  if (r.cluster.requeue && !r.checkpoint.save) {
    throw UserError(args.file + ": cluster.requeue is on but checkpoint.save is unset, so a "
                                "requeued job would start over: set checkpoint.save=DIR (on a "
                                "file system every node shares), or cluster.requeue=false");
  }
  const fs::path run_dir = fs::absolute(train::run_dir_for(
      compiled, args.run_dir.empty() ? std::nullopt : std::optional<fs::path>(args.run_dir))).lexically_normal();
  const fs::path work_dir = fs::current_path();
  require_plain_path(run_dir, "the run directory");
  require_plain_path(work_dir, "the working directory");
  launch::refuse_earlier_run_dir(run_dir, compiled);
  if (!r.cluster.job_name) {
    // The default name is the recipe file's: it must fit an #SBATCH line as a set one does.
    const std::string stem = fs::path(compiled.file).stem().string();
    if (stem.empty() || stem.find_first_of(" \t\n\r%'\"`$\\;#") != std::string::npos)
      throw UserError(fmt::format("the recipe file's name '{}' cannot be a Slurm job name "
                                  "(spaces, quotes, %, $ or ;): set cluster.job_name=NAME",
                                  printable(stem)));
  }

  const launch::SbatchRequest request{.megatron = launch::self_path(),
                              .recipe_file = fs::absolute(args.file).lexically_normal(),
                              .overrides = args.overrides,
                              .run_dir = run_dir,
                              .work_dir = work_dir,
                              .submitted_by = command_line(args)};
  const std::string script = launch::sbatch_script(compiled, request);
  if (args.dry_run) {
    std::cout << script;
    return;
  }
  if (args.test_only) {
    // sbatch reads the script from stdin when no file is named; a temporary file is simpler.
    const fs::path tmp = fs::temp_directory_path() / fmt::format("megatron-submit-{}.sbatch", getpid());
    std::ofstream(tmp) << script;
    const launch::ProcessResult result = sbatch({"sbatch", "--test-only", tmp.string()});
    fs::remove(tmp);
    // sbatch --test-only answers on stderr either way.
    const std::string answer = last_line(result.err + result.out);
    if (result.exit_code != 0)
      throw UserError(fmt::format("Slurm would not accept this job: {}", answer));
    std::cout << answer << "\n";
    return;
  }

  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw UserError("cannot create run directory " + run_dir.string() + ": " + ec.message());
  const fs::path script_path = run_dir / "submit.sbatch";
  {
    std::ofstream out(script_path);
    out << script;
    if (!out) throw RuntimeFailure("cannot write " + script_path.string());
  }
  const launch::ProcessResult result = sbatch({"sbatch", "--parsable", script_path.string()});
  if (result.exit_code != 0) {
    throw RuntimeFailure(fmt::format("sbatch refused {}: {}", script_path.string(),
                                     last_line(result.err + result.out)));
  }
  // --parsable prints "jobid" or "jobid;cluster".
  const std::string answer = last_line(result.out);
  const std::string id = answer.substr(0, answer.find(';'));
  spdlog::info("submitted job {}: {} on {} node(s) x {} rank(s); script {}", id, args.file,
               r.cluster.nodes, r.cluster.gpus_per_node, script_path.string());
  spdlog::info("follow it with: tail -f {}/slurm-{}.out (metrics in {}/metrics.jsonl)",
               run_dir.string(), id, run_dir.string());
  std::cout << id << "\n";
}

}  // namespace

void add_submit_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<SubmitArgs>();
  auto* cmd = app.add_subcommand(
      "submit", "Submit a recipe's training to Slurm: write its batch script and sbatch it");
  cmd->add_option("recipe", args->file, "Recipe YAML file")->required();
  cmd->add_option("overrides", args->overrides, "section.key=value overrides");
  cmd->add_option("--run-dir", args->run_dir,
                  "Where the script, the job's output and metrics go (overrides "
                  "logging.run_dir; default runs/<recipe>/<time>)");
  cmd->add_flag("--dry-run", args->dry_run, "Print the batch script; submit nothing");
  cmd->add_flag("--test-only", args->test_only,
                "Ask Slurm whether and when it would run the job (sbatch --test-only); submit "
                "nothing");
  actions.emplace_back(cmd, [args] { submit(*args); });
}

}  // namespace megatron::cli
