// Memory per rank: weights, gradients and optimizer state from Megatron's bytes per parameter,
// plus activations times the micro-batches in flight. Formulas: docs/plan.md, "Memory".
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

struct BytesPerParameter {
  double weights = 0;    // 4 (f32) or 2 (bf16/f16)
  double gradients = 0;  // 4: f32 main gradients under mixed precision too
  double optimizer = 0;  // f32 master copy (mixed only) + moments, / (D c) when distributed
};

BytesPerParameter bytes_per_parameter(const ModelShape& x);

// Fills each stage's activation_bytes_per_microbatch, microbatches_in_flight and memory.
// Needs parameters_per_rank filled first.
void fill_memory(const ModelShape& x, std::vector<Stage>& stages);

// Index of the stage with the largest per-rank total (the first one on ties).
int64_t peak_stage(const std::vector<Stage>& stages);

}  // namespace megatron::plan
