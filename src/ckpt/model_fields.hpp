// The model a checkpoint holds, as recipe keys and values ("model.num_layers" -> "12"): what
// loading compares with the recipe (first difference named) and what Hugging Face export reads;
// and how a model parameter's tensor-parallel split is written.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ckpt/shard_geometry.hpp"
#include "model/model_config.hpp"
#include "model/parameter.hpp"

namespace megatron::ckpt {

// In the order loading compares them; position-dependent keys only for the position embedding
// in use (max_position_embeddings for learned, rotary_percent and rotary_base for rotary).
std::vector<std::pair<std::string, std::string>> model_fields(const model::ModelConfig& config);

// The checkpoint's name for the dimension tensor parallelism splits.
Split split_of(model::TpSplit split);

}  // namespace megatron::ckpt
