// Pipeline programs: the forward and backward passes each pipeline stage runs, in order, over one
// iteration's micro-batches (Megatron-LM's schedules), and what running them together costs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace megatron::plan {

enum class Phase { Forward, Backward };

// One forward or backward pass of model chunk `chunk` (virtual stage, 0..v-1) of this stage
// on micro-batch `microbatch` (0..m-1).
struct PipelineOp {
  Phase phase = Phase::Forward;
  int chunk = 0;
  int microbatch = 0;
  bool operator==(const PipelineOp&) const = default;
};

// "F(c0,mb3)" / "B(c1,mb0)": for logs, `megatron plan --program` and test failure messages.
std::string to_string(const PipelineOp& op);

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
// The engine runs exactly this list; the plan's bubble and activation peaks come from it.
// Throws std::invalid_argument on sizes below 1 or above 2^30, more than 2^26 chunk passes (v m),
// a stage outside 0..p-1, or the requirements above.
std::vector<PipelineOp> stage_program(recipe::Schedule schedule, int64_t stages, int64_t stage,
                                      int64_t chunks, int64_t microbatches);

// Forwards stage `stage` runs before its first backward (its program's warm-up), and the peak
// number of chunk activations it holds: min(warm-up + 1, v m). Same sizes and errors as
// stage_program, without building the list.
int64_t warmup_forwards(recipe::Schedule schedule, int64_t stages, int64_t stage, int64_t chunks,
                        int64_t microbatches);
int64_t peak_chunks_in_flight(recipe::Schedule schedule, int64_t stages, int64_t stage,
                              int64_t chunks, int64_t microbatches);

// Peak number of micro-batch chunks whose forward ran and backward has not (activations alive)
// over `ops`, one stage's program.
int64_t peak_in_flight(const std::vector<PipelineOp>& ops);

// Every stage's program run together, each op starting when its stage is free and its input has
// arrived (the activation from the previous model position, the gradient from the next), sends
// costing nothing. A forward through one chunk takes 1/v of a unit and a backward 2/v (Megatron's
// backward = 2 x forward), so a stage is busy 3m units per iteration.
struct ProgramTiming {
  double makespan = 0;  // units until the last stage finishes its last op
  double busy = 0;      // units each stage computes (the same on every stage)
  double bubble_fraction() const { return makespan > 0 ? 1.0 - busy / makespan : 0.0; }
};

// Longest programs `time_programs` simulates (ops over every stage): beyond it the plan uses the
// closed form, which the simulation matches for 1F1B and all-forward-all-backward.
inline constexpr int64_t kMaxSimulatedOps = int64_t{1} << 22;

// Simulates `programs` (one per stage, as from stage_program) of a v-chunk pipeline. Throws
// std::logic_error naming the waiting ops when the programs deadlock.
ProgramTiming time_programs(const std::vector<std::vector<PipelineOp>>& programs, int64_t chunks,
                            int64_t microbatches);

}  // namespace megatron::plan
