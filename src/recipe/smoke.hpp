// `megatron run --smoke`: any recipe shrunk to a model and a run the CPU finishes in seconds,
// keeping what makes the recipe itself (family, positions, norm, activation, biases, grouped
// attention, precision, recompute, optimizer), so that a recipe is checked without its hardware.
#pragma once

#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace megatron::recipe {

// Overrides, applied after the user's, that turn `recipe` into its smoke run: 2 layers (2 + 2
// for T5) of width 64 with 4 heads, sequences of 64 tokens, one rank on the CPU, 3 iterations
// of 2 micro-batches of 2, validation at iteration 2, mock data (unless it fine-tunes on its
// own files), and no checkpoint read or written: not even finetune.pretrained, whose weights
// would not fit the shrunk model (fine-tuning starts from random weights).
std::vector<std::string> smoke_overrides(const Recipe& recipe);

}  // namespace megatron::recipe
