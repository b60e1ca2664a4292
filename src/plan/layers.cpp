#include "plan/layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plan/plan.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::plan {
namespace {

std::string mask_name(tensor::AttentionMask mask) {
  return mask == tensor::AttentionMask::Causal ? "causal" : "padding";
}

nlohmann::json attention_json(const tensor::AttentionSpec& a, const std::string& implementation) {
  return {{"mask", mask_name(a.mask)},
          {"score_bias", a.score_bias},
          {"rotary", a.rotary},
          {"cross", a.cross},
          {"kv_cache", a.kv_cache},
          {"implementation", implementation}};
}

}  // namespace

std::vector<LayerPlan> plan_layers(const model::ModelConfig& config,
                                   const std::vector<Stage>& stages, tensor::Device device) {
  std::vector<LayerPlan> layers;
  for (const Stage& stage : stages) {
    for (size_t c = 0; c < stage.chunks.size(); ++c) {
      for (int64_t layer : stage.chunks[c]) {
        LayerPlan p{.layer = layer, .stage = stage.index, .chunk = int64_t(c),
                    .spec = model::block_spec(config, layer)};
        p.self_attention = tensor::attention_support(device, p.spec.self_attention,
                                                     config.head_dim, config.dtype)
                               .implementation;
        if (p.spec.cross_attention) {
          p.cross_attention = tensor::attention_support(device, *p.spec.cross_attention,
                                                        config.head_dim, config.dtype)
                                  .implementation;
        }
        layers.push_back(std::move(p));
      }
    }
  }
  std::sort(layers.begin(), layers.end(),
            [](const LayerPlan& a, const LayerPlan& b) { return a.layer < b.layer; });
  return layers;
}

std::string describe(const model::BlockSpec& spec) {
  const tensor::AttentionSpec& a = spec.self_attention;
  std::string text = a.mask == tensor::AttentionMask::Causal
                         ? "causal self-attention"
                         : "bidirectional self-attention (padding mask)";
  if (a.rotary) text += " with rotary positions";
  if (a.score_bias) text += " with a relative-position bias";
  if (spec.cross_attention) text += ", cross-attention over the encoder output";
  return fmt::format("{}, {} MLP, {}", text, recipe::name_of(spec.mlp.activation),
                     recipe::name_of(spec.norm));
}

std::string layer_runs(const std::vector<LayerPlan>& layers) {
  auto same = [](const LayerPlan& a, const LayerPlan& b) {
    return a.spec == b.spec && a.self_attention == b.self_attention &&
           a.cross_attention == b.cross_attention;
  };
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i + 1;
    while (j < layers.size() && layers[j].layer == layers[j - 1].layer + 1 &&
           same(layers[i], layers[j]))
      ++j;
    const LayerPlan& first = layers[i];
    const std::string which = j - i == 1 ? fmt::format("layer {}", first.layer)
                                         : fmt::format("layers {}-{}", first.layer,
                                                       layers[j - 1].layer);
    out += fmt::format("  {}: {}\n    attention: {}\n", which, describe(first.spec),
                       first.self_attention);
    if (!first.cross_attention.empty())
      out += fmt::format("    cross-attention: {}\n", first.cross_attention);
    i = j;
  }
  return out;
}

nlohmann::json layer_json(const LayerPlan& layer) {
  nlohmann::json out = {
      {"layer", layer.layer},
      {"stage", layer.stage},
      {"chunk", layer.chunk},
      {"norm", recipe::name_of(layer.spec.norm)},
      {"self_attention", attention_json(layer.spec.self_attention, layer.self_attention)},
      {"mlp", {{"kind", "dense"}, {"activation", recipe::name_of(layer.spec.mlp.activation)}}}};
  if (layer.spec.cross_attention)
    out["cross_attention"] = attention_json(*layer.spec.cross_attention, layer.cross_attention);
  return out;
}

}  // namespace megatron::plan
