// The two directions between a checkpoint's own description of its model and a ModelConfig:
// the recipe an imported model gets, and the config an exported checkpoint's metadata gives.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/format.hpp"
#include "ckpt/hf_config.hpp"

namespace megatron::ckpt {

// A complete recipe (YAML) that builds exactly m.config (every model key explicit) and runs as
// it is: mock data, one CPU rank, a short fine-tuning schedule in `dtype`. `source` is named in
// its opening comment.
std::string hf_recipe_yaml(const HfModel& m, tensor::DType dtype, const std::string& source);

// The model a checkpoint holds: meta.model's fields, plus what they leave out taken from
// meta.recipe (norm epsilon, dropouts, init std; rotary models' positions). `padded_vocab` is
// the word embedding's row count. UserError for a missing or unreadable field.
model::ModelConfig gpt_config_from_meta(const CheckpointMeta& meta, int64_t padded_vocab);

}  // namespace megatron::ckpt
