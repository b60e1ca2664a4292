// Test fixture: a CompiledRecipe for a GPT shape with its derived values filled the way the
// recipe compiler fills them, so planner tests need no YAML.
#pragma once

#include <cstdint>

#include "recipe/compile.hpp"

namespace megatron::plan::testing {

struct GptShape {
  int64_t layers = 24;
  int64_t hidden = 2048;
  int64_t heads = 16;
  int64_t seq_length = 2048;
  int64_t vocab = 51200;  // a multiple of 128 x 8, so padding adds nothing up to tp 8
  int64_t micro_batch = 1;
  int64_t global_batch = 1;
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t virtual_pipeline = 1;
  int64_t context = 1;
  int64_t data = 1;
  recipe::DType dtype = recipe::DType::Bf16;
  // Korthikanti et al.'s closed forms describe unfused attention that stores s x s scores.
  bool flash_attention = false;
  int64_t gpus_per_node = 8;
};

// GPT-3 style: learned positions, LayerNorm, GeLU, biases, tied embeddings, dropout 0.1.
recipe::CompiledRecipe make_gpt(const GptShape& shape);

// Fills compiled.derived again from compiled.recipe, after a test changed the recipe.
void rederive(recipe::CompiledRecipe& compiled);

}  // namespace megatron::plan::testing
