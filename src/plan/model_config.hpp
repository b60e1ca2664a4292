// The one place a compiled recipe becomes the model's description (model::ModelConfig): the
// family rules (what BERT, T5 and GPT change) are written here and nowhere else.
#pragma once

#include "model/model_config.hpp"
#include "recipe/derived.hpp"
#include "recipe/recipe.hpp"
#include "tensor/dtype.hpp"

namespace megatron::plan {

model::ModelConfig model_config(const recipe::Recipe& recipe, const recipe::Derived& derived);
tensor::DType model_dtype(recipe::DType dtype);

}  // namespace megatron::plan
