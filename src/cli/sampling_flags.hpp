// The checks `megatron generate` and `megatron eval` apply to their sampling flags (--temperature,
// --top-k, --top-p), so that both refuse the same values with the same words.
#pragma once

#include <cstdint>

namespace megatron::cli {

// UserError for a temperature outside [0, 100], a top-p outside [0, 1] (NaN included), or both
// top-k and top-p given (Megatron's rule).
void check_sampling_flags(double temperature, int64_t top_k, double top_p);

}  // namespace megatron::cli
