// The pipeline schedule's summary: its name, micro-batches per iteration and the bubble,
// the fraction of a step a stage sits idle while the pipeline fills and drains.
#pragma once

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// bubble_fraction = (p - 1) / (v m + p - 1): idle time over step time.
Schedule make_schedule(const ModelShape& x);

}  // namespace megatron::plan
