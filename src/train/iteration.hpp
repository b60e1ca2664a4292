// One training iteration of a rank (forward and backward through its stage's program, gradients
// reduced, the optimizer step), and the evaluation pass over the validation split.
#pragma once

#include <cstdint>

#include "train/pipeline_step.hpp"
#include "train/run_context.hpp"

namespace megatron::train {

struct IterationOutcome {
  int64_t global_batch = 0;  // sequences this iteration trained on
  double loss = 0.0;         // the objective (lm + sop) over the global batch, on every rank
  StepLosses terms;          // its terms: mean token loss, mean sentence-order loss
  double grad_norm = 0.0;    // before clipping, unscaled
  double lr = 0.0;
  double loss_scale = 1.0;   // the scale this iteration ran with
  bool skipped = false;      // an f16 overflow: no step, the loss scale backs off
};

// Iteration `iteration` after `consumed` samples. Throws RuntimeFailure when the loss or the
// gradient norm is not finite and no dynamic loss scale can skip the step.
IterationOutcome train_iteration(RunContext& run, int64_t iteration, int64_t consumed);

// Mean losses over eval.iters global batches of the validation split (the same batches every
// time, so successive evaluations compare like with like), on every rank.
StepLosses evaluate(RunContext& run);

}  // namespace megatron::train
