// What this engine can run: the rules that depend on the device or on what the engine does not
// do yet, checked once for every job (run, plan, eval, generate, serve), so `megatron plan`
// refuses exactly what `megatron run` would. Rules that depend only on the recipe are recipe/'s.
#pragma once

#include <cstdint>
#include <string>

#include "model/kinds.hpp"
#include "recipe/compile.hpp"
#include "recipe/recipe.hpp"
#include "tensor/dtype.hpp"

namespace megatron::plan {

// cluster.device, with auto resolved from cluster.hardware (cpu for the cpu profile, the device
// a calibrated profile file records, else cuda).
tensor::Device run_device(const recipe::Recipe& r);

// Why a model with `position` embeddings cannot train on `pipeline` stages, or empty when it can:
// T5's relative positions train on one stage so far. Training refuses such a layout, and
// `convert --pp` refuses to write a checkpoint for one.
std::string pipeline_refusal(model::PositionEmbedding position, int64_t pipeline);

// The jobs that run a model; each runs a different set of layouts.
enum class Job { Train, Eval, Generate };

// Refuses, with a UserError naming the key to change (and the recipe file, for training):
// - training: context parallelism (not trained yet) and T5's relative positions on a pipeline;
// - eval: context and sequence parallelism, and a tensor-parallel split that leaves the last rank
//   none of the scored vocabulary;
// - generation: any layout but tensor parallelism over every rank;
// - every job: a layout that does not fit the world (plan::place), and a layer whose attention the device's backend cannot run (tensor::attention_support:
//   on CUDA, heads wider than the attention kernels' 128 channels).
void check_engine_support(const recipe::CompiledRecipe& compiled, Job job = Job::Train);

}  // namespace megatron::plan
