#include "cli/generation_model.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "dist/launcher.hpp"
#include "launch/local_job.hpp"
#include "plan/engine_support.hpp"
#include "train/checkpoint_job.hpp"
#include "train/model_weights.hpp"

namespace megatron::cli {

void ModelArgs::add_to(CLI::App* cmd) {
  cmd->add_option("checkpoint", checkpoint, "Checkpoint (save directory or iter_NNNNNNN)")->required();
  cmd->add_option("overrides", overrides, "section.key=value recipe overrides");
  cmd->add_option("--threads", threads, "CPU threads (default: every core)")->check(parallelism("threads"));
  cmd->add_option("--device", device, "cpu, cuda or auto (default: the recipe's)");
  cmd->add_option("--nproc", nproc,
                  "Start a local job of this many ranks (mpirun -np N), the model split over them "
                  "by tensor parallelism")
      ->check(parallelism("processes"));
  tokenizer.add_to(cmd, false);
}

GenerationModel::GenerationModel(const ModelArgs& a, const std::function<void()>& before_start) {
  const std::optional<std::filesystem::path> dir = ckpt::resolve_checkpoint(a.checkpoint);
  if (!dir) {
    throw UserError(a.checkpoint + ": no checkpoint there (a save directory with `latest`, or an "
                                   "iter_NNNNNNN directory)");
  }
  dir_ = dir->string();
  world_ = launch::job_world_size(a.nproc);
  if (dist::launch_info().rank != 0) spdlog::set_level(spdlog::level::warn);
  const ckpt::CheckpointReader reader(*dir);
  compiled_ = std::make_unique<recipe::CompiledRecipe>(train::compile_for_checkpoint(
      reader.meta(), *dir,
      {.world = world_, .tensor = world_, .batch = 1, .device = a.device, .overrides = a.overrides}));
  const recipe::Recipe& r = compiled_->recipe;
  if (r.model.arch != recipe::Arch::Gpt || compiled_->derived.classes > 0) {
    throw UserError(fmt::format("{}: generation needs a causal language model (arch gpt); this "
                                "checkpoint is {}",
                                dir_, compiled_->derived.classes > 0 ? "a fine-tuned classifier"
                                                                     : recipe::name_of(r.model.arch)));
  }
  plan::check_engine_support(*compiled_, plan::Job::Generate);
  tokenizer_ = train::checkpoint_tokenizer(a.tokenizer, r);
  if (tokenizer_->vocab_size() > r.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but the model {}: give the "
                                "tokenizer the checkpoint was trained with",
                                dir_, tokenizer_->vocab_size(), r.model.vocab_size));
  }
  if (before_start) before_start();
  launch::exec_local_job_if_asked(a.nproc, a.threads);
  ctx_ = std::make_unique<train::ModelContext>(*compiled_, a.threads);
  train::load_model_weights(reader, *ctx_->model, *ctx_->backend);
}

generate::Engine GenerationModel::engine() const {
  const model::ModelConfig& c = ctx_->config;
  return {.backend = *ctx_->backend,
          .model = *ctx_->model,
          .tokenizer = *tokenizer_,
          .max_positions = c.max_positions,
          .vocab = std::min(c.vocab, c.padded_vocab)};
}

std::string GenerationModel::description() const {
  const model::ModelConfig& c = ctx_->config;
  return fmt::format("{}: {} layers, hidden {}, {} heads, {} positions, vocabulary {}; {} rank{} "
                     "(tensor parallel), {}",
                     dir_, c.num_layers, c.hidden, c.heads, c.max_positions, c.vocab, world_,
                     world_ == 1 ? "" : "s", ctx_->backend->description());
}

}  // namespace megatron::cli
