#include "model/parameter_names.hpp"

#include <algorithm>
#include <optional>

#include <algorithm>

namespace megatron::model {
namespace {

constexpr std::string_view kBlocks = "decoder.layers.";

}  // namespace

std::string block_prefix(int64_t layer, int64_t encoder_layers) {
  if (encoder_layers > 0 && layer < encoder_layers) return "encoder.layers." + std::to_string(layer) + ".";
  return std::string(kBlocks) + std::to_string(layer - encoder_layers) + ".";
}

namespace {

// The layer number after `prefix` in `name`, saturating at max_layer; nullopt when `name` is not
// "<prefix><digits>.".
std::optional<int64_t> layer_after(std::string_view name, std::string_view prefix, int64_t max_layer) {
  if (!name.starts_with(prefix)) return std::nullopt;
  size_t at = prefix.size();
  int64_t layer = 0;
  bool digits = false;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9') {
    layer = std::min<int64_t>(layer * 10 + (name[at++] - '0'), max_layer);
    digits = true;
  }
  if (!digits || at >= name.size() || name[at] != '.') return std::nullopt;
  return layer;
}

}  // namespace

ParameterPlace place_of(std::string_view name, int64_t max_layer, int64_t encoder_layers) {
  using Part = ParameterPlace::Part;
  if (name.starts_with("embedding.")) return {.part = Part::Embedding};
  if (encoder_layers > 0) {
    if (name.starts_with("encoder_relative_pos_emb.") || name.starts_with("decoder_relative_pos_emb.")) {
      return {.part = Part::Embedding};
    }
    if (name.starts_with("encoder.final_layernorm.")) {
      return {.part = Part::Block, .layer = std::min(encoder_layers - 1, max_layer)};
    }
    if (const auto layer = layer_after(name, "encoder.layers.", max_layer)) {
      return {.part = Part::Block, .layer = *layer};
    }
    if (const auto layer = layer_after(name, kBlocks, max_layer)) {
      return {.part = Part::Block, .layer = std::min(*layer + encoder_layers, max_layer)};
    }
    return {.part = Part::Head};
  }
  if (const auto layer = layer_after(name, kBlocks, max_layer)) return {.part = Part::Block, .layer = *layer};
  return {.part = Part::Head};
}

}  // namespace megatron::model
