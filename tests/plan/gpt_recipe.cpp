#include "gpt_recipe.hpp"

#include <algorithm>

namespace megatron::plan::testing {
namespace {

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

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
  r.precision.dtype = shape.dtype;
  const int64_t world = shape.tensor * shape.pipeline * shape.context * shape.data;
  r.cluster.gpus_per_node = std::min(world, shape.gpus_per_node);
  r.cluster.nodes = (world + r.cluster.gpus_per_node - 1) / r.cluster.gpus_per_node;
  r.cluster.hardware = "h100-sxm";
  compiled.file = "test.yaml";
  rederive(compiled);
  return compiled;
}

void rederive(recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  recipe::Derived& d = compiled.derived;
  const int64_t t = r.parallel.tensor, p = r.parallel.pipeline, v = r.parallel.virtual_pipeline;
  d.data_parallel = r.parallel.data.value_or(1);
  d.world_size = t * p * r.parallel.context * d.data_parallel;
  d.num_microbatches =
      r.training.global_batch_size / (r.training.micro_batch_size * d.data_parallel);
  d.head_dim = r.model.kv_channels.value_or(r.model.hidden_size / r.model.num_attention_heads);
  d.num_query_groups = r.model.num_query_groups.value_or(r.model.num_attention_heads);
  d.ffn_hidden_size = r.model.ffn_hidden_size.value_or(4 * r.model.hidden_size);
  d.add_qkv_bias = r.model.add_qkv_bias.value_or(r.model.add_bias_linear);
  d.padded_vocab_size = round_up(r.model.vocab_size, r.model.make_vocab_size_divisible_by * t);
  d.max_position_embeddings = r.model.max_position_embeddings.value_or(r.data.seq_length);
  d.decoder_num_layers = r.model.arch == recipe::Arch::T5
                             ? r.model.decoder_num_layers.value_or(r.model.num_layers)
                             : 0;
  d.decoder_seq_length =
      r.model.arch == recipe::Arch::T5 ? r.data.decoder_seq_length.value_or(r.data.seq_length) : 0;
  d.schedule = r.parallel.schedule.value_or(v > 1 ? recipe::Schedule::Interleaved
                                                  : recipe::Schedule::OneFOneB);
  const int64_t layers = r.model.num_layers + d.decoder_num_layers;
  d.layers_per_stage.assign(p, layers / p);
  d.layers_per_chunk.assign(p * v, layers / (p * v));
  d.recompute_num_layers = r.training.recompute == recipe::Recompute::Full
                               ? r.training.recompute_num_layers.value_or(layers / p)
                               : 0;
}

}  // namespace megatron::plan::testing
