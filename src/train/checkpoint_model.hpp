// The one opener of a saved model for the jobs that run one (eval, generate, serve): the
// checkpoint resolved, its recipe compiled for the job's ranks and checked for the job, its
// tokenizer; then this rank's model with the checkpoint's weights.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "ckpt/checkpoint_reader.hpp"
#include "data/tokenizer.hpp"
#include "plan/engine_support.hpp"
#include "recipe/compile.hpp"
#include "train/checkpoint_job.hpp"
#include "train/model_context.hpp"

namespace megatron::train {

class CheckpointModel {
 public:
  // `checkpoint`: a save directory (its latest) or an iter_NNNNNNN directory. UserError when
  // there is none, when the job cannot run its recipe on this layout and device
  // (plan::check_engine_support for `kind`), when the tokenizer has more tokens than the
  // model's vocabulary, or when the checkpoint lacks a weight of the model or holds it in another
  // shape (the overrides may resize it: checked before anything is allocated). Nothing is started yet: the job adds its own checks first.
  CheckpointModel(const std::string& checkpoint, const CheckpointJob& job,
                  const TokenizerChoice& tokenizer, plan::Job kind);
  CheckpointModel(const CheckpointModel&) = delete;
  CheckpointModel& operator=(const CheckpointModel&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const recipe::CompiledRecipe& compiled() const { return compiled_; }
  const data::Tokenizer& tokenizer() const { return *tokenizer_; }

  // This rank's Plan, MPI, backend, groups and model, with the checkpoint's weights loaded (from
  // any layout that wrote them). Once; the context lives as long as this.
  ModelContext& load(int threads);
  ModelContext& context() const;  // after load

 private:
  std::filesystem::path dir_;
  std::unique_ptr<ckpt::CheckpointReader> reader_;
  recipe::CompiledRecipe compiled_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::unique_ptr<ModelContext> context_;
};

}  // namespace megatron::train
