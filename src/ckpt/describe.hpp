// What `megatron ckpt inspect` prints about a checkpoint: its iteration and progress, the layout
// it was saved under, its dtype and optimizer, the model's fields, its overrides and tensors.
#pragma once

#include <string>

#include "ckpt/checkpoint_reader.hpp"

namespace megatron::ckpt {

// Lines ending in "\n", the last one the tensors' count and size.
std::string describe(const CheckpointReader& reader);

}  // namespace megatron::ckpt
