// Pipeline-parallel schedules as pure functions: the order in which one pipeline stage runs the
// forward and backward passes of its model chunks over an iteration's micro-batches (Megatron-LM).
#pragma once

#include <string>
#include <vector>

namespace megatron::parallel {

enum class Phase { Forward, Backward };

// One forward or backward pass of model chunk `chunk` (virtual stage, 0..v-1) of this stage
// on micro-batch `microbatch` (0..m-1).
struct PipelineOp {
  Phase phase = Phase::Forward;
  int chunk = 0;
  int microbatch = 0;
  bool operator==(const PipelineOp&) const = default;
};

// "F(c0,mb3)" / "B(c1,mb0)": for logs and test failure messages.
std::string to_string(const PipelineOp& op);

enum class ScheduleKind {
  AllForwardAllBackward,  // GPipe: every forward, then every backward
  OneFOneB,               // Megatron's forward_backward_pipelining_without_interleaving (v == 1)
  Interleaved,            // Megatron's forward_backward_pipelining_with_interleaving (v > 1)
};

// The ops stage `stage` of a `stages`-deep pipeline (p) runs, in order, when each stage holds
// `chunks` model chunks (v) and an iteration runs `microbatches` micro-batches (m). The model is
// chunk 0 of stages 0..p-1, then chunk 1 of stages 0..p-1, ... Every (chunk, micro-batch) appears
// once forward and once backward, micro-batches in increasing order within each chunk and phase.
//  - AllForwardAllBackward: forwards chunk by chunk, then backwards from the last chunk down.
//  - OneFOneB: min(p - stage - 1, m) warm-up forwards, then one forward one backward, then the
//    remaining backwards. Requires v == 1.
//  - Interleaved: virtual micro-batch k runs forward chunk (k / p) % v on micro-batch
//    (k / (p v)) p + k % p, and backward chunk v - 1 - (k / p) % v on the same micro-batch;
//    warm-up is (p - stage - 1) 2 + (v - 1) p forwards capped at m v (Megatron-Core).
//    Requires v > 1 and m a multiple of p.
// Throws std::invalid_argument on sizes below 1, a stage outside 0..p-1, or the requirements above.
std::vector<PipelineOp> stage_schedule(ScheduleKind kind, int stages, int stage, int chunks,
                                       int microbatches);

// Peak number of micro-batch chunks whose forward ran and backward has not (activations alive)
// over `ops`, one stage's schedule.
int peak_in_flight(const std::vector<PipelineOp>& ops);

}  // namespace megatron::parallel
