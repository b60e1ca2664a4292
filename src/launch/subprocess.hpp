// Running another program (sbatch, scontrol) and collecting what it printed: for commands
// that drive a tool rather than replace themselves with it (local_job.hpp does that).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace megatron::launch {

struct ProcessResult {
  int exit_code = 0;  // 128 + N when signal N ended it
  std::string out;
  std::string err;
};

// Runs argv[0] (searched on PATH) with the rest as its arguments and this environment.
// nullopt when the program cannot be found or started.
std::optional<ProcessResult> run_process(const std::vector<std::string>& argv);

}  // namespace megatron::launch
