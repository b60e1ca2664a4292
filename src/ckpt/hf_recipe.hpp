// The recipe an imported Hugging Face model gets: every model key explicit, so that the model
// it describes (plan::model_config) is the one imported, and export reads it back the same way.
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

}  // namespace megatron::ckpt
