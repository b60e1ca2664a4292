// The pipeline schedule's summary: its name, micro-batches per iteration and the bubble, the
// fraction of a step a stage sits idle while the pipeline fills and drains.
#pragma once

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// The bubble comes from simulating every stage's program (plan/program.hpp); programs longer than
// kMaxSimulatedOps use the closed form (p - 1) / (v m + p - 1) instead.
Schedule make_schedule(const ModelShape& x);

}  // namespace megatron::plan
