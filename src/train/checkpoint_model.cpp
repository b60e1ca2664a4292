#include "train/checkpoint_model.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "ckpt/directory.hpp"
#include "ckpt/model_weights.hpp"
#include "core/error.hpp"

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
