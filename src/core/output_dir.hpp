// Output directories a command writes into, made ready before any work: created when missing
// and probed for writing, so an unwritable destination is bad input named as the user gave it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace megatron {

// Creates `dir` when missing and probes it by making (and removing) a directory in it, since
// permissions alone do not tell (root, /proc, read-only mounts). UserError naming `flag` and
// `dir`. Returns the directories it created, deepest first, for remove_created() after a
// failure.
std::vector<std::filesystem::path> prepare_output_dir(const std::string& flag, const std::string& dir);

// Removes the directories prepare_output_dir created, where a failure left them empty.
void remove_created(const std::vector<std::filesystem::path>& created);

}  // namespace megatron
