#include "train/checkpoint_model.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "ckpt/directory.hpp"
#include "ckpt/model_weights.hpp"
#include "core/error.hpp"
#include "model/language_model.hpp"
#include "plan/model_config.hpp"

namespace megatron::train {
namespace {

std::filesystem::path resolved(const std::string& checkpoint) {
  const std::optional<std::filesystem::path> dir = ckpt::resolve_checkpoint(checkpoint);
  if (!dir) {
    throw UserError(checkpoint + ": no checkpoint there (a save directory with `latest`, or an "
                                 "iter_NNNNNNN directory)");
  }
  return *dir;
}

}  // namespace

CheckpointModel::CheckpointModel(const std::string& checkpoint, const CheckpointJob& job,
                                 const TokenizerChoice& tokenizer, plan::Job kind)
    : dir_(resolved(checkpoint)),
      reader_(std::make_unique<ckpt::CheckpointReader>(dir_)),
      compiled_(compile_for_checkpoint(reader_->meta(), dir_, job)) {
  plan::check_engine_support(compiled_, kind);
  tokenizer_ = checkpoint_tokenizer(tokenizer, compiled_.recipe);
  // A token id past the model's vocabulary would index past its embedding.
  if (tokenizer_->vocab_size() > compiled_.recipe.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but the model {}: give the "
                                "tokenizer the checkpoint was trained with",
                                dir_.string(), tokenizer_->vocab_size(),
                                compiled_.recipe.model.vocab_size));
  }
  // The user's overrides may make the model any size: its shapes are checked against the
  // checkpoint's before a tensor is allocated, so a model too large for memory is refused as
  // any other mismatch is.
  const model::ModelConfig config = plan::model_config(compiled_.recipe, compiled_.derived);
  ckpt::check_model_shapes(*reader_, model::LanguageModel::describe(config), config.vocab);
}

ModelContext& CheckpointModel::load(int threads) {
  if (context_) throw std::logic_error("CheckpointModel::load: the model is loaded already");
  context_ = std::make_unique<ModelContext>(compiled_, threads);
  ckpt::load_model_weights(*reader_, *context_->model, *context_->backend);
  return *context_;
}

ModelContext& CheckpointModel::context() const {
  if (!context_) throw std::logic_error("CheckpointModel::context: load the model first");
  return *context_;
}

}  // namespace megatron::train
