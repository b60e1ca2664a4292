// The rule that keeps one run per run directory, shared by `megatron run` and `megatron submit`:
// an earlier run's metrics are only continued by the run that resumes it.
#pragma once

#include <filesystem>

#include "recipe/compile.hpp"

namespace megatron::launch {

// UserError when `dir` holds an earlier run's metrics.jsonl and the recipe's checkpoint.save
// holds no checkpoint to resume that run from (--force is the way past it).
void refuse_earlier_run_dir(const std::filesystem::path& dir, const recipe::CompiledRecipe& compiled);

}  // namespace megatron::launch
