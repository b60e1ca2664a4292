// Where a compiled recipe's layers and batch go on its world: the data-parallel size, the
// micro-batches, the pipeline schedule, each stage's and chunk's layers, the recomputed layers.
#pragma once

#include <cstdint>
#include <vector>

#include "recipe/compile.hpp"
#include "recipe/derived.hpp"
#include "recipe/recipe.hpp"

namespace megatron::plan {

struct Placement {
  int64_t world_size = 1;
  int64_t data_parallel = 1;
  int64_t microbatches = 1;  // gradient-accumulation steps per iteration, per data-parallel rank
  recipe::Schedule schedule = recipe::Schedule::OneFOneB;
  // Transformer layers held by each pipeline stage (all virtual chunks together).
  std::vector<int64_t> layers_per_stage;
  // Layers per model chunk, chunk c of stage s at [c * pipeline + s] (Megatron's order).
  std::vector<int64_t> layers_per_chunk;
  int64_t recompute_layers = 0;  // per stage under full recompute, else 0
  // Gradient elements per data-parallel reduction bucket (parallel.ddp_bucket_size, else
  // Megatron's max(40M, 1M x data-parallel size)).
  int64_t bucket_elements = 0;
  std::vector<recipe::Derivation> log;  // how each value above was derived, in order
};

// Places the recipe on compiled.world_size ranks. Throws a UserError at the recipe key to change
// ("recipe.yaml:12:5: ...") when the layout does not divide the world, the layers do not split
// over the stages and chunks, or the global batch does not split into micro-batches.
Placement place(const recipe::CompiledRecipe& compiled);

}  // namespace megatron::plan
