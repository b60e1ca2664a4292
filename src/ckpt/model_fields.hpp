// The model a checkpoint holds, as recipe keys and values ("model.num_layers" -> "12"): what
// loading compares with the recipe (first difference named) and what Hugging Face export reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/model_config.hpp"

namespace megatron::ckpt {

// In the order loading compares them; position-dependent keys only for the position embedding
// in use (max_position_embeddings for learned, rotary_percent and rotary_base for rotary).
std::vector<std::pair<std::string, std::string>> model_fields(const model::ModelConfig& config);

}  // namespace megatron::ckpt
