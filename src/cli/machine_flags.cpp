#include "cli/machine_flags.hpp"

#include "cli/limits.hpp"

namespace megatron::cli {

void add_machine_flags(CLI::App* cmd, int& threads, std::string& device) {
  cmd->add_option("--threads", threads, "CPU threads (default: every core)")
      ->check(parallelism("threads"));
  cmd->add_option("--device", device, "cpu, cuda or auto (default: the recipe's)");
}

}  // namespace megatron::cli
