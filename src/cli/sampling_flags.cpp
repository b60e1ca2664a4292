#include "cli/sampling_flags.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron::cli {

void check_sampling_flags(double temperature, int64_t top_k, double top_p) {
  // Written as "inside" so that NaN, which the flags' parser accepts, is outside.
  if (!(temperature >= 0.0 && temperature <= 100.0)) {
    throw UserError(fmt::format("--temperature {} is outside [0, 100] (0: greedy)", temperature));
  }
  if (!(top_p >= 0.0 && top_p <= 1.0)) {
    throw UserError(fmt::format("--top-p {} is outside [0, 1] (0: off)", top_p));
  }
  if (top_k > 0 && top_p > 0.0) {
    throw UserError("--top-k and --top-p cannot be used together (Megatron's rule): give one");
  }
}

generate::Sampling SamplingArgs::sampling() const {
  check_sampling_flags(temperature, top_k, top_p);
  return generate::sampling_for(temperature, greedy ? 1 : top_k, top_p);
}

}  // namespace megatron::cli
