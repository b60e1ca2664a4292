// `megatron run`: trains the recipe's model as this rank's part of its parallel layout (or on
// one process), logging as Megatron does, and stopping at the recipe's length, a wall-clock
// limit, or a non-finite loss.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "recipe/compile.hpp"

namespace megatron::train {

struct TrainOptions {
  std::optional<std::filesystem::path> run_dir;  // overrides logging.run_dir
  int threads = 0;                               // 0: OMP_NUM_THREADS or every core
  std::string recipe_text;                       // the recipe file as written, kept in the run dir
  std::vector<std::string> overrides;            // command-line overrides, kept in checkpoints
};

struct TrainResult {
  int64_t iterations = 0;
  int64_t consumed_samples = 0;
  std::vector<double> losses;      // the objective (lm loss, + sop loss for BERT) of every iteration
  std::vector<double> grad_norms;  // and its gradient norm
  std::optional<double> final_val_loss;  // the objective, as `losses`
  std::filesystem::path run_dir;
  std::string stop_reason;
  // A stop signal or the time limit ended training before its last iteration, after saving a
  // checkpoint to resume from (a requeued Slurm job continues there).
  bool stopped_with_checkpoint = false;
  int64_t first_iteration = 1;  // after a checkpoint of iteration N: N + 1
};

TrainResult train(const recipe::CompiledRecipe& compiled, const TrainOptions& options);

// Where a run writes: --run-dir, else logging.run_dir, else runs/<recipe>/<time>. Settled once per
// job (the local launcher passes it to every rank).
std::filesystem::path run_dir_for(const recipe::CompiledRecipe& compiled,
                                  const std::optional<std::filesystem::path>& command_line);

// The error for a job of `ranks` processes whose recipe's layout wants another world size
// (`wanted` compiled for its own layout): what the layout needs and how to start it.
UserError wrong_rank_count(const recipe::CompiledRecipe& wanted, int64_t ranks);

}  // namespace megatron::train
