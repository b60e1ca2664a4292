// The rotation frequency of each channel pair of rotary position embeddings, with the scaling
// of RotaryOptions applied: computed once on the host, in f64, for the CPU and CUDA backends alike.
#pragma once

#include <vector>

#include "tensor/op_params.hpp"

namespace megatron::tensor {

// frequency[i] for i < rotary_dim / 2: base^(-2i / rotary_dim), then scaled as transformers'
// _compute_*_parameters scale them (linear, llama3, yarn).
std::vector<double> rotary_frequencies(const RotaryOptions& options);

}  // namespace megatron::tensor
