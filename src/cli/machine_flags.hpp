// The flags that say where a job that runs a saved model computes (generate, serve, eval):
// --threads and --device, with one wording and one check for every such command.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace megatron::cli {

// --threads (1 to this machine's ceiling; 0, the default, every core) and --device (cpu, cuda
// or auto; empty, the default, the recipe's).
void add_machine_flags(CLI::App* cmd, int& threads, std::string& device);

}  // namespace megatron::cli
