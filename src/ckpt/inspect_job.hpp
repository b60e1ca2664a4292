// `megatron ckpt inspect` and `megatron ckpt verify` as calls: what a checkpoint holds, and
// whether every piece of it is whole, read from its files without building its model.
#pragma once

#include <ostream>
#include <string>

namespace megatron::ckpt {

// Writes the iteration, layout, model and tensors of the checkpoint `path` names (a checkpoint
// directory, or a save directory's latest), or with `recipe` the resolved recipe it was trained
// with. UserError when `path` holds no checkpoint.
void inspect_checkpoint(const std::string& path, bool recipe, std::ostream& out);

// Checks every piece's CRC-32 and that every rank file is there; UserError naming the first
// problem, else writes one line saying how many rank files matched.
void verify_checkpoint(const std::string& path, std::ostream& out);

}  // namespace megatron::ckpt
