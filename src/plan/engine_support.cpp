#include "plan/engine_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "plan/hardware.hpp"
#include "plan/placement.hpp"
#include "plan/hardware_file.hpp"
#include "model/block_spec.hpp"
#include "plan/model_config.hpp"
#include "tensor/attention_spec.hpp"

namespace megatron::plan {

tensor::Device run_device(const recipe::Recipe& r) {
  switch (r.cluster.device) {
    case recipe::DeviceKind::Cpu: return tensor::Device::Cpu;
    case recipe::DeviceKind::Cuda: return tensor::Device::Cuda;
    case recipe::DeviceKind::Auto: break;
  }
  // Auto: the device the hardware profile describes (a calibrated file records its own). A name
  // this build does not know is a GPU's; the planner reports it.
  const auto device_of = [](const HardwareProfile& p) {
    return p.device == "cpu" ? tensor::Device::Cpu : tensor::Device::Cuda;
  };
  if (is_profile_file(r.cluster.hardware))
    return device_of(find_hardware(r.cluster.hardware));
  for (const HardwareProfile& p : hardware_profiles())
    if (p.name == r.cluster.hardware) return device_of(p);
  return tensor::Device::Cuda;
}

std::string pipeline_refusal(model::PositionEmbedding position, int64_t pipeline) {
  if (position == model::PositionEmbedding::Relative && pipeline != 1)
    return "T5's relative positions train on one pipeline stage so far";
  return "";
}

namespace {

void check_training_layout(const recipe::CompiledRecipe& c) {
  const recipe::Recipe& r = c.recipe;
  if (const std::string why = pipeline_refusal(r.model.position_embedding, r.parallel.pipeline);
      !why.empty()) {
    throw UserError(c.file + ": parallel.pipeline: " + why +
                    "; set parallel.pipeline=1 or model.position_embedding: learned or rope");
  }
  if (r.parallel.context != 1) {
    throw UserError(c.file + ": parallel.context: context parallelism does not train yet; set "
                             "parallel.context=1");
  }
}

void check_eval_layout(const recipe::CompiledRecipe& c) {
  const recipe::ParallelSection& layout = c.recipe.parallel;
  if (layout.context != 1 || layout.sequence_parallel) {
    throw UserError("eval runs tensor-, pipeline- and data-parallel layouts: set parallel.context=1 "
                    "and parallel.sequence_parallel=false (any layout's checkpoint loads into any "
                    "of them)");
  }
  // Every tensor-parallel rank must hold some of the scored vocabulary (its softmax shard).
  const int64_t scored_vocab = std::min(c.recipe.model.vocab_size, c.derived.padded_vocab_size);
  const int64_t tp = layout.tensor;
  if (tp > 1 && scored_vocab <= c.derived.padded_vocab_size / tp * (tp - 1)) {
    throw UserError(fmt::format("parallel.tensor={}: the last tensor-parallel rank would hold none of "
                                "the {} scored vocabulary columns; use fewer tensor-parallel ranks",
                                tp, scored_vocab));
  }
}

void check_generation_layout(const recipe::CompiledRecipe& c) {
  const recipe::ParallelSection& p = c.recipe.parallel;
  if (p.pipeline != 1 || p.context != 1 || p.sequence_parallel ||
      p.tensor != c.world_size) {
    throw UserError("generation splits the model over every rank by tensor parallelism: leave "
                    "parallel.tensor, pipeline, context and sequence_parallel as they are");
  }
}

}  // namespace

void check_engine_support(const recipe::CompiledRecipe& c, Job job) {
  switch (job) {
    case Job::Train: check_training_layout(c); break;
    case Job::Eval: check_eval_layout(c); break;
    case Job::Generate: check_generation_layout(c); break;
  }
  // Then the layout on the world: the job's own rules above name the key more precisely.
  place(c);
  // Every layer's attention, as the backend of the run's device answers for it (the layers of a
  // stack share their spec: the first encoder and the first decoder layer speak for all).
  const model::ModelConfig config = model_config(c.recipe, c.derived);
  const tensor::Device device = run_device(c.recipe);
  for (int64_t layer : {int64_t(0), config.num_layers}) {
    if (layer >= config.total_layers()) continue;
    const model::BlockSpec spec = model::block_spec(config, layer);
    std::vector<tensor::AttentionSpec> cores{spec.self_attention};
    if (spec.cross_attention) cores.push_back(*spec.cross_attention);
    for (const tensor::AttentionSpec& core : cores) {
      const std::string refusal =
          tensor::attention_support(device, core, config.head_dim, config.dtype).refusal;
      if (!refusal.empty()) {
        throw UserError(c.file + ": model.kv_channels: " + refusal +
                        "; use more heads (model.num_attention_heads) or run on the cpu");
      }
    }
  }
}

}  // namespace megatron::plan
