// Which optimizer updates the weights and how the learning rate decays: owned here, where
// they act; recipes name them (recipe/enum_names.cpp).
#pragma once

namespace megatron::optim {

enum class OptimizerKind { AdamW, Sgd };
enum class LrDecay { Constant, Linear, Cosine, InverseSquareRoot, Wsd };
enum class WsdDecay { Linear, Cosine, Exponential, MinusSqrt };

}  // namespace megatron::optim
