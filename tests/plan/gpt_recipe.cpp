#include "gpt_recipe.hpp"

#include <algorithm>

#include "recipe/checks.hpp"

namespace megatron::plan::testing {
recipe::CompiledRecipe make_gpt(const GptShape& shape) {
  recipe::CompiledRecipe compiled;
  recipe::Recipe& r = compiled.recipe;
  r.model.arch = recipe::Arch::Gpt;
  r.model.num_layers = shape.layers;
  r.model.hidden_size = shape.hidden;
  r.model.num_attention_heads = shape.heads;
  r.model.vocab_size = shape.vocab;
  r.model.flash_attention = shape.flash_attention;
  r.data.seq_length = shape.seq_length;
  r.training.micro_batch_size = shape.micro_batch;
  r.training.global_batch_size = shape.global_batch;
  r.training.lr = 1e-4;
  r.parallel.tensor = shape.tensor;
  r.parallel.pipeline = shape.pipeline;
  r.parallel.virtual_pipeline = shape.virtual_pipeline;
  r.parallel.context = shape.context;
  r.parallel.data = shape.data;
  r.parallel.layers_per_stage = shape.layers_per_stage;
  r.precision.dtype = shape.dtype;
  const int64_t world = shape.tensor * shape.pipeline * shape.context * shape.data;
  r.cluster.gpus_per_node = std::min(world, shape.gpus_per_node);
  r.cluster.nodes = (world + r.cluster.gpus_per_node - 1) / r.cluster.gpus_per_node;
  r.cluster.hardware = "h100-sxm";
  compiled.file = "test.yaml";
  rederive(compiled);
  return compiled;
}

recipe::CompiledRecipe gpt3_175b(int64_t tensor, int64_t pipeline, int64_t data,
                                 recipe::DType dtype) {
  return make_gpt({.layers = 96,
                   .hidden = 12288,
                   .heads = 96,
                   .seq_length = 2048,
                   .global_batch = 1536,
                   .tensor = tensor,
                   .pipeline = pipeline,
                   .data = data,
                   .dtype = dtype});
}

void rederive(recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  const int64_t world = r.parallel.tensor * r.parallel.pipeline * r.parallel.context *
                        r.parallel.data.value_or(1);
  const recipe::Locator where(compiled.provenance, compiled.file);
  compiled.derived = recipe::derive(r, where);
  compiled.world_size = world;
}

}  // namespace megatron::plan::testing
