#include <vector>

#include "plan/report.hpp"

namespace megatron::plan {
namespace {

nlohmann::json memory_json(const MemoryBreakdown& m) {
  return {{"weights", m.weights},
          {"gradients", m.gradients},
          {"optimizer", m.optimizer},
          {"activations", m.activations},
          {"runtime", m.runtime},
          {"total", m.total()}};
}

nlohmann::json stage_json(const Stage& stage) {
  return {{"index", stage.index},
          {"layers", stage.layers},
          {"chunks", stage.chunks},
          {"has_embedding", stage.has_embedding},
          {"has_output_layer", stage.has_output_layer},
          {"parameters_per_rank", stage.parameters_per_rank},
          {"activation_bytes_per_microbatch", stage.activation_bytes_per_microbatch},
          {"microbatches_in_flight", stage.microbatches_in_flight},
          {"activation_bytes_transient", stage.activation_bytes_transient},
          {"memory", memory_json(stage.memory)}};
}

}  // namespace

nlohmann::json to_json(const Plan& plan, const recipe::CompiledRecipe& compiled) {
  nlohmann::json out;
  out["recipe"] = compiled.file;
  const Layout& l = plan.layout;
  out["layout"] = {{"tp", l.tp},
                   {"cp", l.cp},
                   {"dp", l.dp},
                   {"pp", l.pp},
                   {"vpp", l.vpp},
                   {"world", l.world},
                   {"rank_order", "tp-cp-dp-pp"}};
  const Parameters& p = plan.parameters;
  out["parameters"] = {{"total", p.total},
                       {"embedding", p.embedding},
                       {"per_layer", p.per_layer},
                       {"per_decoder_layer", p.per_decoder_layer},
                       {"output_layer", p.output_layer},
                       {"per_rank_max", p.per_rank_max},
                       {"per_rank_min", p.per_rank_min}};
  out["memory"] = {{"peak_stage", plan.peak_stage}, {"peak_rank", memory_json(plan.peak_rank)}};
  std::vector<nlohmann::json> stages;
  for (const Stage& stage : plan.stages) stages.push_back(stage_json(stage));
  out["stages"] = stages;
  std::vector<nlohmann::json> layers;
  for (const LayerPlan& layer : plan.layers) layers.push_back(layer_json(layer));
  out["layers"] = layers;
  out["gradient_bucket_elements"] = plan.gradient_bucket_elements;
  out["flops"] = {{"model_per_iteration", plan.flops.model_per_iteration},
                  {"hardware_per_iteration", plan.flops.hardware_per_iteration}};
  out["tokens_per_iteration"] = plan.tokens_per_iteration;
  out["generation"] = {{"kv_cache_bytes_per_token", plan.generation.kv_cache_bytes_per_token},
                       {"max_positions", plan.generation.max_positions},
                       {"serve_pool_bytes", plan.generation.serve_pool_bytes},
                       {"block_table_bytes", plan.generation.block_table_bytes}};
  const Communication& c = plan.communication;
  out["communication"] = {{"tensor_parallel", c.tensor_parallel},
                          {"pipeline_parallel", c.pipeline_parallel},
                          {"data_parallel", c.data_parallel},
                          {"embedding_sync", c.embedding_sync}};
  out["schedule"] = {{"name", plan.schedule.name},
                     {"microbatches", plan.schedule.microbatches},
                     {"chunks", plan.schedule.chunks},
                     {"bubble_fraction", plan.schedule.bubble_fraction},
                     {"bubble_simulated", plan.schedule.bubble_simulated}};
  const Estimate& e = plan.estimate;
  out["estimate"] = {{"hardware", e.hardware},
                     {"compute_time_s", e.compute_time_s},
                     {"communication_time_s", e.communication_time_s},
                     {"gemm_time_s", e.gemm_time_s},
                     {"attention_time_s", e.attention_time_s},
                     {"memory_time_s", e.memory_time_s},
                     {"overhead_time_s", e.overhead_time_s},
                     {"optimizer_time_s", e.optimizer_time_s},
                     {"step_time_s", e.step_time_s},
                     {"mfu", e.mfu},
                     {"tokens_per_second", e.tokens_per_second},
                     {"fits", e.fits},
                     {"warnings", e.warnings},
                     {"suggestions", e.suggestions}};
  return out;
}

}  // namespace megatron::plan
