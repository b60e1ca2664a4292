// Each transformer layer as the Plan runs it: the stage and chunk that hold it, what it is made of
// (model::block_spec) and which kernels run its attention on the run's device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/block_spec.hpp"
#include "tensor/dtype.hpp"

namespace megatron::plan {

struct Stage;

struct LayerPlan {
  int64_t layer = 0;  // global index (T5: the encoder's first, then the decoder's)
  int64_t stage = 0;
  int64_t chunk = 0;  // among the stage's chunks
  model::BlockSpec spec;
  std::string self_attention;   // its implementation on the device (tensor::attention_support)
  std::string cross_attention;  // T5's decoder layers; empty otherwise
};

// Every layer of `config`, in layer order, placed as `stages` place them.
std::vector<LayerPlan> plan_layers(const model::ModelConfig& config,
                                   const std::vector<Stage>& stages, tensor::Device device);

// "causal self-attention with rotary positions, swiglu MLP, rmsnorm": what the layer computes.
std::string describe(const model::BlockSpec& spec);
nlohmann::json layer_json(const LayerPlan& layer);
// `layers` (in order) in runs of consecutive layers of the same make and kernels, a paragraph
// each: "  layers 0-11: <describe>\n    attention: <implementation>\n" (and cross-attention's).
std::string layer_runs(const std::vector<LayerPlan>& layers);

}  // namespace megatron::plan
