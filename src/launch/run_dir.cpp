#include "launch/run_dir.hpp"

#include <fmt/format.h>

#include "ckpt/directory.hpp"
#include "core/error.hpp"

namespace megatron::launch {

void refuse_earlier_run_dir(const std::filesystem::path& dir, const recipe::CompiledRecipe& compiled) {
  const std::filesystem::path metrics = dir / "metrics.jsonl";
  std::error_code ec;
  if (std::filesystem::file_size(metrics, ec) == 0 || ec) return;
  const auto& save = compiled.recipe.checkpoint.save;
  if (save && ckpt::resolve_checkpoint(*save)) return;  // this run resumes that one
  // Two runs' lines in one metrics.jsonl would read as one run.
  throw UserError(fmt::format(
      "run directory {} already holds an earlier run's metrics ({}), and this run does not "
      "resume from a checkpoint: choose another --run-dir (or logging.run_dir), remove it, or "
      "pass --force to append to it",
      dir.string(), metrics.string()));
}

}  // namespace megatron::launch
