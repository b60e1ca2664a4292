// The choices that shape a model: its family, positions, norm, activation and recompute.
// Owned here, where the layers act on them; recipes name them (recipe/enum_names.cpp).
#pragma once

namespace megatron::model {

enum class Arch { Gpt, Bert, T5 };
enum class PositionEmbedding { Learned, Rotary, Relative };
// Rotary frequencies scaled for contexts past the trained one (transformers' rope_type).
enum class RopeScaling { None, Linear, Llama3, Yarn };
enum class NormKind { LayerNorm, RmsNorm };
enum class Activation { Gelu, GeluTanh, Swiglu, Geglu };  // Geglu: tanh-GeLU gate (T5 v1.1)
enum class Recompute { None, Selective, Full };

}  // namespace megatron::model
