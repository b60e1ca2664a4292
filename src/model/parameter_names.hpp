// The model's global parameter names, in one place: how a transformer block's parameters are
// prefixed, and, from a name, which part of the model holds it (what resharding needs to place
// a checkpoint tensor on its pipeline stage).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::model {

// "decoder.layers.<layer>.": every parameter of global layer `layer` starts with it. T5
// (encoder_layers > 0) numbers its encoder first: "encoder.layers.<layer>." below
// encoder_layers, then "decoder.layers.<layer - encoder_layers>.", as Megatron-Core names them.
std::string block_prefix(int64_t layer, int64_t encoder_layers = 0);

struct ParameterPlace {
  enum class Part { Embedding, Block, Head };
  Part part = Part::Head;
  int64_t layer = -1;  // Block: the global layer (saturates at `max_layer`)
};

// Embedding ("embedding.*": the first stage), Block (block_prefix(n)...: layer n's stage) or
// Head (everything else: the final norm and the heads, on the last stage). Layer numbers past
// `max_layer` read as max_layer, so a damaged name cannot overflow. T5 (encoder_layers > 0):
// "encoder.layers.n" is layer n, "decoder.layers.n" layer encoder_layers + n, the encoder's final
// norm sits with its last layer, and the relative-position tables with the embedding.
ParameterPlace place_of(std::string_view name, int64_t max_layer, int64_t encoder_layers = 0);

}  // namespace megatron::model
