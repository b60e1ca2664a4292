// Host scalars summed across a group (losses, norms, counts) through the f32 collectives the
// communicators offer.
#pragma once

#include "dist/communicator.hpp"
#include "tensor/backend.hpp"

namespace megatron::parallel {

// The sum over the group's ranks of each rank's `value`, on every rank. Each value travels as
// an f32 high part and an f32 remainder: exact when one rank holds the value (a loss passed
// from the last stage), within f32 rounding of the sum (about 1e-7 relative) otherwise.
double sum_across(tensor::Backend& backend, dist::Communicator& group, double value);

}  // namespace megatron::parallel
