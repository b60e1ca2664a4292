// The batch script `megatron submit` hands to sbatch: the allocation from the recipe's cluster
// section, one srun task per rank, and the save-then-requeue protocol around the time limit.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "recipe/compile.hpp"

namespace megatron::launch {

// The exit code of `megatron run --stopped-exit-code` that the script reads as "stopped early
// with a checkpoint saved: requeue me" (BSD's EX_TEMPFAIL, "try again later").
inline constexpr int kRequeueExitCode = 75;

struct SbatchRequest {
  std::string megatron;                  // the executable the ranks run (absolute)
  std::filesystem::path recipe_file;     // absolute
  std::vector<std::string> overrides;    // as given to submit
  std::filesystem::path run_dir;         // absolute; the job's output goes there too
  std::filesystem::path work_dir;        // the job's working directory (absolute)
  std::string submitted_by;              // the submit command line, for the header
};

// The whole script, #SBATCH lines first.
std::string sbatch_script(const recipe::CompiledRecipe& compiled, const SbatchRequest& request);

// `word` as one POSIX shell word: bare when it holds only safe characters, else single-quoted.
std::string shell_quote(const std::string& word);

}  // namespace megatron::launch
