// Text from one rank to every rank of a group (a path, a request), through the group's own
// collective: its length, then its bytes packed into i32 elements.
#pragma once

#include <string>

#include "dist/communicator.hpp"
#include "tensor/backend.hpp"

namespace megatron::dist {

// Rank `root`'s `text` on every rank of `group` (the others' `text` is ignored). `backend` makes
// the tensors: one whose device the group's collectives take (the run's backend under NCCL).
// Every rank of the group must call it.
std::string broadcast_text(Communicator& group, tensor::Backend& backend, const std::string& text,
                           int root);

}  // namespace megatron::dist
