// Bytes each rank sends per iteration: tensor-parallel all-reduces, pipeline activations,
// data-parallel gradient reduction, tied-embedding sync. Formulas: docs/plan.md, "Communication".
#pragma once

#include <vector>

#include "plan/plan.hpp"
#include "plan/shape.hpp"
#include "plan/stages.hpp"

namespace megatron::plan {

// Pipeline traffic of one stage's rank, split by direction: activations to the next stage
// (the next chunk's stage under interleaving: stage p-1 sends on to stage 0) and gradients
// back to the previous one.
struct PipelineSends {
  double to_next = 0;
  double to_previous = 0;
  double total() const { return to_next + to_previous; }
};

double tensor_parallel_bytes(const ModelShape& x, const Stage& stage);
PipelineSends pipeline_sends(const ModelShape& x, const Chunks& chunks, const Stage& stage);
double data_parallel_bytes(const ModelShape& x, const Stage& stage);
double embedding_sync_bytes(const ModelShape& x, const Stage& stage);

// The busiest rank's bytes of each kind (each kind's maximum over stages).
Communication count_communication(const ModelShape& x, const Chunks& chunks,
                                  const std::vector<Stage>& stages);

}  // namespace megatron::plan
