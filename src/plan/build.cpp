#include "plan/build.hpp"

#include <algorithm>

#include "plan/communication.hpp"
#include "plan/engine_support.hpp"
#include "plan/estimate.hpp"
#include "plan/flops.hpp"
#include "plan/memory.hpp"
#include "plan/model_config.hpp"
#include "plan/parameters.hpp"
#include "plan/serving.hpp"
#include "plan/schedule.hpp"
#include "plan/shape.hpp"
#include "plan/stages.hpp"

namespace megatron::plan {

Plan build_plan(const recipe::CompiledRecipe& compiled, const Placement& placement,
                const HardwareProfile& hardware) {
  const ModelShape x = shape_of(compiled, placement);
  const Chunks chunks = model_chunks(x, placement.layers_per_chunk);
  Plan plan;
  plan.layout = {.tp = x.t, .cp = x.c, .dp = x.D, .pp = x.p, .vpp = x.v, .world = x.world};
  plan.sequence_parallel = x.sp;
  plan.gradient_bucket_elements = placement.bucket_elements;
  plan.derivations = placement.log;
  plan.model = model_config(compiled.recipe, compiled.derived);
  plan.stages = assign_stages(x, chunks);
  plan.layers = plan_layers(plan.model, plan.stages, run_device(compiled.recipe));
  plan.parameters = count_parameters(x, plan.stages);
  fill_memory(x, plan.stages);
  for (Stage& stage : plan.stages) stage.memory.runtime = hardware.runtime_overhead_bytes;
  plan.peak_stage = peak_stage(plan.stages);
  plan.peak_rank = plan.stages[plan.peak_stage].memory;
  plan.flops = count_flops(x, plan.stages);
  plan.tokens_per_iteration = x.B * x.s;
  plan.communication = count_communication(x, chunks, plan.stages);
  plan.schedule = make_schedule(x);
  plan.estimate = make_estimate(x, chunks, plan, hardware);
  if (x.arch == recipe::Arch::Gpt && x.C == 0) {
    size_t layers = 0;
    for (const Stage& stage : plan.stages) layers = std::max(layers, stage.layers.size());
    const double element = x.dtype == recipe::DType::F32 ? 4.0 : 2.0;
    const int64_t positions = compiled.derived.max_position_embeddings;
    const int64_t blocks = serve_blocks(positions);
    plan.generation = {.kv_cache_bytes_per_token = 2.0 * double(layers) * double(x.g / x.t) *
                                                   double(x.d) * element,
                       .max_positions = positions};
    plan.generation.serve_pool_bytes = plan.generation.kv_cache_bytes_per_token *
                                       double(kServeSequences * blocks * kServeBlockSize);
    plan.generation.block_table_bytes = 4.0 * double(kServeStepTokens) * double(blocks + 1);
  }
  return plan;
}

}  // namespace megatron::plan
