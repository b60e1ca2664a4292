// Fills a rank's model with a checkpoint's weights, whatever layout wrote it: each parameter's
// shard is read by its global name and converted to the model's dtype. For evaluation and
// generation, which need no optimizer state.
#pragma once

#include "ckpt/checkpoint_reader.hpp"
#include "model/language_model.hpp"

namespace megatron::eval {

// Throws UserError naming the checkpoint and the parameter it lacks or whose shape differs.
void load_model_weights(const ckpt::CheckpointReader& checkpoint, model::LanguageModel& model,
                        tensor::Backend& backend);

}  // namespace megatron::eval
