#include "plan/suggestions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "plan/build.hpp"
#include "plan/units.hpp"

namespace megatron::plan {
namespace {

using recipe::CompiledRecipe;

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

struct Relayout {
  CompiledRecipe compiled;
  std::string gpus;  // "" when the world stays the same, else " on N GPUs"
};

// The recipe with tensor x pipeline changed and the derived values that depend on them redone
// the way the recipe compiler does; nullopt when the layout would not be valid.
std::optional<Relayout> with_layout(const CompiledRecipe& base, int64_t tensor, int64_t pipeline) {
  Relayout out{base, ""};
  recipe::Recipe& r = out.compiled.recipe;
  recipe::Derived& d = out.compiled.derived;
  const int64_t context = std::max<int64_t>(r.parallel.context, 1);
  const int64_t vpp = std::max<int64_t>(r.parallel.virtual_pipeline, 1);
  const int64_t replica = tensor * pipeline * context;
  // Keep the world when it divides; otherwise keep the data-parallel size and ask for GPUs.
  int64_t world = std::max<int64_t>(d.world_size, 1);
  if (world % replica != 0) {
    world = replica * std::max<int64_t>(d.data_parallel, 1);
    out.gpus = fmt::format(" on {} GPUs", world);
  }
  const int64_t data = world / replica;
  const int64_t per_step = std::max<int64_t>(r.training.micro_batch_size, 1) * data;
  if (r.training.global_batch_size % per_step != 0) return std::nullopt;
  const int64_t microbatches = r.training.global_batch_size / per_step;
  if (d.schedule == recipe::Schedule::Interleaved && microbatches % pipeline != 0)
    return std::nullopt;
  const int64_t layers = r.model.num_layers + d.decoder_num_layers;
  if (layers % (pipeline * vpp) != 0) return std::nullopt;

  r.parallel.tensor = tensor;
  r.parallel.pipeline = pipeline;
  r.parallel.data.reset();
  r.parallel.layers_per_stage.clear();
  d.world_size = world;
  d.data_parallel = data;
  d.num_microbatches = microbatches;
  d.padded_vocab_size = round_up(r.model.vocab_size, r.model.make_vocab_size_divisible_by * tensor);
  d.layers_per_stage.assign(pipeline, layers / pipeline);
  d.layers_per_chunk.assign(pipeline * vpp, layers / (pipeline * vpp));
  if (r.training.recompute == recipe::Recompute::Full)
    d.recompute_num_layers =
        std::min(r.training.recompute_num_layers.value_or(layers / pipeline), layers / pipeline);
  return out;
}

struct Candidate {
  std::string change;
  CompiledRecipe compiled;
};

std::vector<Candidate> candidates(const CompiledRecipe& base, const Plan& plan) {
  const recipe::Recipe& r = base.recipe;
  const recipe::Derived& d = base.derived;
  const Layout& layout = plan.layout;
  std::vector<Candidate> out;

  if (!r.parallel.distributed_optimizer && layout.dp * layout.cp > 1) {
    Candidate c{"parallel.distributed_optimizer=true", base};
    c.compiled.recipe.parallel.distributed_optimizer = true;
    out.push_back(std::move(c));
  }
  if (r.training.recompute == recipe::Recompute::None) {
    Candidate c{"training.recompute=selective", base};
    c.compiled.recipe.training.recompute = recipe::Recompute::Selective;
    out.push_back(std::move(c));
  }
  int64_t most_layers = 0;
  for (const Stage& stage : plan.stages)
    most_layers = std::max<int64_t>(most_layers, static_cast<int64_t>(stage.layers.size()));
  if (r.training.recompute != recipe::Recompute::Full || d.recompute_num_layers < most_layers) {
    Candidate c{"training.recompute=full", base};
    c.compiled.recipe.training.recompute = recipe::Recompute::Full;
    c.compiled.recipe.training.recompute_num_layers.reset();
    c.compiled.derived.recompute_num_layers = most_layers;
    out.push_back(std::move(c));
  }
  if (auto more = with_layout(base, layout.tp, 2 * layout.pp))
    out.push_back({fmt::format("parallel.pipeline={}{}", 2 * layout.pp, more->gpus),
                   std::move(more->compiled)});
  const int64_t tensor = 2 * layout.tp;
  const bool heads_divide = r.model.num_attention_heads % tensor == 0 &&
                            d.num_query_groups % tensor == 0 && d.ffn_hidden_size % tensor == 0 &&
                            (!r.parallel.sequence_parallel || r.data.seq_length % tensor == 0);
  if (heads_divide && tensor <= r.cluster.gpus_per_node)
    if (auto wider = with_layout(base, tensor, layout.pp))
      out.push_back(
          {fmt::format("parallel.tensor={}{}", tensor, wider->gpus), std::move(wider->compiled)});
  if (layout.tp > 1 && !r.parallel.sequence_parallel) {
    Candidate c{"parallel.sequence_parallel=true", base};
    c.compiled.recipe.parallel.sequence_parallel = true;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::vector<std::string> suggest_fixes(const recipe::CompiledRecipe& compiled,
                                       const HardwareProfile& hardware, const Plan& plan) {
  std::vector<std::string> out;
  const double now = plan.peak_rank.total();
  for (const Candidate& candidate : candidates(compiled, plan)) {
    const Plan other = build_plan(candidate.compiled, hardware);
    const double then = other.peak_rank.total();
    if (then < now)
      out.push_back(
          fmt::format("{} (stage {}: {})", candidate.change, other.peak_stage, gib(then)));
  }
  return out;
}

}  // namespace megatron::plan
