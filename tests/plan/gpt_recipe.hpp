// Test fixture: a CompiledRecipe for a GPT shape with its derived values filled the way the
// recipe compiler fills them, so planner tests need no YAML.
#pragma once

#include <cstdint>
#include <vector>

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
  std::vector<int64_t> layers_per_stage;  // uneven split; empty = even
};

// GPT-3 style: learned positions, LayerNorm, GeLU, biases, tied embeddings, dropout 0.1.
recipe::CompiledRecipe make_gpt(const GptShape& shape);

// GPT-3 175B (Brown et al. 2020): 96 layers, hidden 12288, 96 heads, 2048 tokens, vocab
// padded to 51200, global batch 1536 at micro batch 1; by default Narayanan et al.'s layout
// of tp 8, pp 16, dp 8 (1024 GPUs).
recipe::CompiledRecipe gpt3_175b(int64_t tensor = 8, int64_t pipeline = 16, int64_t data = 8,
                                 recipe::DType dtype = recipe::DType::Bf16);

// Fills compiled.derived and world_size again from compiled.recipe, after a test changed it, with
// the recipe compiler's own derivation (so fixture and compiler cannot drift apart).
void rederive(recipe::CompiledRecipe& compiled);

}  // namespace megatron::plan::testing
