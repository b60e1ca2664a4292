// Which transformer layers live on which pipeline stage: model chunks in Megatron's
// interleaved order, and the embedding / output layer placement.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// Global layer indices of each model chunk, indexed [chunk * p + stage]. Layers are numbered
// chunk by chunk in model order: chunk 0 of stages 0..p-1, then chunk 1 of stages 0..p-1, ...
// `layers_per_chunk` is Placement::layers_per_chunk; when it does not describe p*v chunks holding
// every layer, the layers are split evenly (the first chunks take the remainder).
using Chunks = std::vector<std::vector<int64_t>>;
Chunks model_chunks(const ModelShape& x, const std::vector<int64_t>& layers_per_chunk);

// One Stage per pipeline rank with its layers (all chunks, in chunk order), and the embedding
// on stage 0 and the output layer on the last stage. Sizes are filled in later.
std::vector<Stage> assign_stages(const ModelShape& x, const Chunks& chunks);

}  // namespace megatron::plan
