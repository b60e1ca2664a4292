#include "model/parameter_names.hpp"

#include <algorithm>

namespace megatron::model {
namespace {

constexpr std::string_view kBlocks = "decoder.layers.";

}  // namespace

std::string block_prefix(int64_t layer, int64_t encoder_layers) {
  if (encoder_layers > 0 && layer < encoder_layers) return "encoder.layers." + std::to_string(layer) + ".";
  return std::string(kBlocks) + std::to_string(layer - encoder_layers) + ".";
}

ParameterPlace place_of(std::string_view name, int64_t max_layer) {
  if (name.starts_with("embedding.")) return {.part = ParameterPlace::Part::Embedding};
  if (!name.starts_with(kBlocks)) return {.part = ParameterPlace::Part::Head};
  size_t at = kBlocks.size();
  int64_t layer = 0;
  bool digits = false;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9') {
    layer = std::min<int64_t>(layer * 10 + (name[at++] - '0'), max_layer);
    digits = true;
  }
  if (!digits || at >= name.size() || name[at] != '.') return {.part = ParameterPlace::Part::Head};
  return {.part = ParameterPlace::Part::Block, .layer = layer};
}

}  // namespace megatron::model
