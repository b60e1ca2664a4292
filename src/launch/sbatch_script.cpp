#include "launch/sbatch_script.hpp"

#include <fmt/format.h>

#include <sstream>

#include "core/build_info.hpp"
#include "plan/engine_support.hpp"

namespace megatron::launch {

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=/.,:@%") == std::string::npos;
  if (safe) return word;
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string sbatch_script(const recipe::CompiledRecipe& compiled, const SbatchRequest& request) {
  const recipe::ClusterSection& c = compiled.recipe.cluster;
  const bool gpus = plan::run_device(compiled.recipe) == tensor::Device::Cuda;
  const std::string run_dir = request.run_dir.string();
  std::ostringstream s;
  const auto line = [&](const std::string& option) { s << "#SBATCH " << option << "\n"; };

  s << "#!/bin/bash\n";
  s << "# Written by megatron submit (megatron " << build_info::version() << ", commit "
    << build_info::git_commit() << ").\n";
  s << "#   " << request.submitted_by << "\n";
  s << "# Submit it again as it is with: sbatch " << shell_quote((request.run_dir / "submit.sbatch").string())
    << "\n";
  line("--job-name=" + c.job_name.value_or(std::filesystem::path(compiled.file).stem().string()));
  line(fmt::format("--nodes={}", c.nodes));
  line(fmt::format("--ntasks-per-node={}", c.gpus_per_node));
  if (gpus) line(fmt::format("--gpus-per-node={}", c.gpus_per_node));
  if (c.cpus_per_task) line(fmt::format("--cpus-per-task={}", *c.cpus_per_task));
  if (c.partition) line("--partition=" + *c.partition);
  if (c.account) line("--account=" + *c.account);
  if (c.qos) line("--qos=" + *c.qos);
  if (c.constraint) line("--constraint=" + *c.constraint);
  if (c.time_limit) line("--time=" + *c.time_limit);
  if (c.exclusive) line("--exclusive");
  if (c.mail_type) line("--mail-type=" + *c.mail_type);
  if (c.mail_user) line("--mail-user=" + *c.mail_user);
  // sbatch reads #SBATCH values up to the first space: paths with one are refused by submit.
  line("--chdir=" + request.work_dir.string());
  line("--output=" + run_dir + "/slurm-%j.out");
  line("--open-mode=append");  // a requeued job's lines follow the first attempt's
  if (c.requeue) {
    // Without B:, Slurm signals the job step's tasks (the ranks themselves), not this shell.
    line(fmt::format("--signal=USR1@{}", c.signal_seconds));
    line("--requeue");
  } else {
    line("--no-requeue");
  }
  for (const std::string& extra : c.sbatch) line(extra);

  s << "\nset -u\n";
  s << "export SLURM_UNBUFFEREDIO=1\n";
  if (c.cpus_per_task) s << "export OMP_NUM_THREADS=" << *c.cpus_per_task << "\n";
  for (const std::string& setup : c.setup) s << setup << "\n";
  s << "echo \"megatron submit: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on "
       "$SLURM_JOB_NUM_NODES node(s): $SLURM_JOB_NODELIST\"\n";

  // Each rank takes GPU (local rank mod visible GPUs), as Megatron's ranks do; no
  // --kill-on-bad-exit: ranks leaving with the requeue code one after another must not be
  // killed, and a rank that fails ends its peers through MPI or the watchdog.
  std::vector<std::string> srun = {"srun", "--mpi=pmix"};
  srun.insert(srun.end(), c.srun.begin(), c.srun.end());
  srun.push_back(request.megatron);
  srun.push_back("run");
  srun.push_back(request.recipe_file.string());
  srun.insert(srun.end(), request.overrides.begin(), request.overrides.end());
  for (const std::string& a : {std::string("--run-dir"), run_dir}) srun.push_back(a);
  // submit checked that the run directory was new; later attempts continue its metrics.
  srun.push_back("--force");
  if (c.requeue) {
    srun.push_back("--stopped-exit-code");
    srun.push_back(std::to_string(kRequeueExitCode));
  }
  std::string command;
  for (const std::string& word : srun) {
    // Appended piecewise: `" " + string` trips GCC 12's false -Wrestrict warning.
    if (!command.empty()) command += ' ';
    command += shell_quote(word);
  }
  s << command << "\n";
  s << "status=$?\n";
  if (c.requeue) {
    s << "if [ \"$status\" -eq " << kRequeueExitCode << " ]; then\n";
    s << "  echo \"megatron submit: training stopped before its end with a checkpoint saved: "
         "requeueing job $SLURM_JOB_ID\"\n";
    // Last: requeueing ends this script at once.
    s << "  scontrol requeue \"$SLURM_JOB_ID\"\n";
    s << "  exit 0\n";
    s << "fi\n";
  }
  s << "exit $status\n";
  return s.str();
}

}  // namespace megatron::launch
