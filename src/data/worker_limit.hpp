// The ceiling on tokenizing threads (`--workers`) that a machine is asked to run: far more
// threads than cores only costs memory, and tens of thousands of them exhaust it.
#pragma once

#include <string_view>

namespace megatron::data {

// max_parallelism() (core/parallelism.hpp): the one rule for threads, processes and workers.
int max_workers();

// Throws UserError naming `flag` when `workers` is below 1 or above max_workers().
void check_workers(int workers, std::string_view flag = "--workers");

}  // namespace megatron::data
