// Fills a rank's model with a checkpoint's weights, whatever layout wrote it: each parameter's
// shard is read by its global name and converted to the model's dtype. For evaluation,
// generation and fine-tuning from a pre-trained model, which need no optimizer state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "model/language_model.hpp"

namespace megatron::train {

// Throws UserError naming the checkpoint and the parameter it lacks or whose shape differs.
// `may_lack`: parameters the checkpoint need not hold (they keep the values they have); returns
// the names of those it did not hold.
std::vector<std::string> load_model_weights(const ckpt::CheckpointReader& checkpoint,
                                            model::LanguageModel& model, tensor::Backend& backend,
                                            const std::function<bool(const std::string&)>& may_lack = {});

}  // namespace megatron::train
