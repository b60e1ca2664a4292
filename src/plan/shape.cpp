#include "plan/shape.hpp"

#include <algorithm>
#include <limits>

#include "core/checked.hpp"
#include "model/block_spec.hpp"
#include "plan/model_config.hpp"

namespace megatron::plan {
namespace {

// The planner divides by layout sizes; a hand-built or half-filled recipe must not crash it.
int64_t at_least_one(int64_t value) { return std::max<int64_t>(value, 1); }

}  // namespace

ModelShape shape_of(const recipe::CompiledRecipe& compiled, const Placement& placement) {
  const recipe::Recipe& r = compiled.recipe;
  const recipe::Derived& dv = compiled.derived;
  ModelShape x;
  x.model = model_config(r, dv);
  const model::ModelConfig& m = x.model;
  x.arch = r.model.arch;
  x.B = at_least_one(r.training.global_batch_size);
  x.b = at_least_one(r.training.micro_batch_size);
  x.s = at_least_one(r.data.seq_length);
  x.h = at_least_one(r.model.hidden_size);
  x.a = at_least_one(r.model.num_attention_heads);
  x.g = dv.num_query_groups > 0 ? dv.num_query_groups : x.a;
  x.d = dv.head_dim > 0 ? dv.head_dim : x.h / x.a;
  x.F = dv.ffn_hidden_size > 0
            ? dv.ffn_hidden_size
            : checked_mul(int64_t{4}, x.h, "the ffn hidden size (4 x model.hidden_size)");
  x.V = dv.padded_vocab_size > 0 ? dv.padded_vocab_size : r.model.vocab_size;
  x.C = dv.classes;
  const bool learned = r.model.position_embedding == recipe::PositionEmbedding::Learned;
  x.P = learned ? (dv.max_position_embeddings > 0 ? dv.max_position_embeddings : x.s) : 0;
  x.L = at_least_one(r.model.num_layers);
  if (x.arch == recipe::Arch::T5) {
    x.Ld = dv.decoder_num_layers > 0 ? dv.decoder_num_layers : x.L;
    x.sd = dv.decoder_seq_length > 0 ? dv.decoder_seq_length : x.s;
    if (r.model.position_embedding == recipe::PositionEmbedding::Relative)
      x.R = r.model.relative_attention_num_buckets.value_or(32);
  }

  x.t = at_least_one(r.parallel.tensor);
  x.p = at_least_one(r.parallel.pipeline);
  x.v = at_least_one(r.parallel.virtual_pipeline);
  x.c = at_least_one(r.parallel.context);
  x.D = at_least_one(placement.data_parallel);
  x.m = at_least_one(placement.microbatches);
  const std::string_view world = "the world size (tensor x pipeline x context x data)";
  x.world = checked_mul(checked_mul(checked_mul(x.t, x.p, world), x.c, world), x.D, world);
  x.gpus_per_node = at_least_one(r.cluster.gpus_per_node);
  x.schedule = placement.schedule;
  // One chunk per stage is plain 1F1B whatever the name says (Megatron does the same).
  if (x.schedule == recipe::Schedule::Interleaved && x.v == 1)
    x.schedule = recipe::Schedule::OneFOneB;

  // Gated units (SwiGLU, GeGLU) double fc1.
  x.swiglu = model::block_spec(m, 0).mlp.gated();
  x.layernorm = m.norm == model::NormKind::LayerNorm;
  x.bias_linear = m.linear_bias;
  x.qkv_bias = m.qkv_bias;
  x.qk_norm = m.qk_norm;
  x.tied = m.tie_embeddings;
  x.binary_head = m.binary_head;
  x.token_types = m.token_types;
  x.lm_head_transform = m.lm_head_transform;
  x.output_bias = m.output_bias;
  x.pooler = m.pooler;
  x.flash = r.model.flash_attention;
  x.hidden_dropout = r.model.hidden_dropout;
  x.attention_dropout = r.model.attention_dropout;

  x.sp = r.parallel.sequence_parallel && x.t > 1;
  x.distributed_optimizer = r.parallel.distributed_optimizer;
  x.recompute = r.training.recompute;
  if (x.recompute == recipe::Recompute::Full)
    // 0 under full recompute can only mean "not derived": recompute every layer of the stage.
    x.recompute_layers =
        placement.recompute_layers > 0 ? placement.recompute_layers : std::numeric_limits<int64_t>::max();
  x.dtype = r.precision.dtype;
  x.optimizer = r.training.optimizer;
  x.sgd_momentum = r.training.sgd_momentum;
  return x;
}

}  // namespace megatron::plan
