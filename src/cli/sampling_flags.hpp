// The sampling flags of `megatron generate` and `megatron eval` (--temperature, --top-k, --top-p),
// checked with the same words and turned into generate::Sampling by the same rule.
#pragma once

#include <cstdint>

#include "generate/sampling.hpp"

namespace megatron::cli {

// UserError for a temperature outside [0, 100], a top-p outside [0, 1] (NaN included), or both
// top-k and top-p given (Megatron's rule).
void check_sampling_flags(double temperature, int64_t top_k, double top_p);

struct SamplingArgs {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 0.0;
  bool greedy = false;  // --greedy, where a command offers it: as --top-k 1

  // check_sampling_flags, then generate::sampling_for: a temperature of 0 is greedy.
  generate::Sampling sampling() const;
};

}  // namespace megatron::cli
