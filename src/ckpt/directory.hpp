// The save directory: iter_NNNNNNN checkpoints, written under a hidden staging name and renamed
// when complete, and `latest`, replaced atomically (rename) only after that. A crash at any
// moment leaves `latest` naming a complete checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace megatron::ckpt {

std::string iteration_dir_name(int64_t iteration);  // iter_0000010
// Where a checkpoint is written before it is complete: save/.iter_0000010.partial
std::filesystem::path staging_dir(const std::filesystem::path& save, int64_t iteration);

// Renames the staging directory to its final name (replacing an older copy), syncs, then makes
// save/latest name it (written to a temporary file, synced, renamed over the old one).
std::filesystem::path publish(const std::filesystem::path& save, int64_t iteration);

// The iteration save/latest names (iter_NNNNNNN), or nullopt when there is no `latest` or it
// names no iteration directory.
std::optional<int64_t> latest_iteration(const std::filesystem::path& save);

// Removes staging directories that an interrupted save left behind and, when keep > 0, all but
// the newest `keep` complete checkpoints (never the one latest names).
void prune(const std::filesystem::path& save, int64_t keep);

// The checkpoint `path` names: a checkpoint directory itself (it holds checkpoint.h5), or a save
// directory whose `latest` names one. nullopt when `path` holds no checkpoint at all (a new run);
// a `latest` that names a missing checkpoint is a UserError.
std::optional<std::filesystem::path> resolve_checkpoint(const std::filesystem::path& path);

// The checkpoint `path` names, for the tools that read one (convert, ckpt inspect, ckpt verify):
// as resolve_checkpoint, but no checkpoint there is a UserError saying what to pass instead.
std::filesystem::path existing_checkpoint(const std::string& path);

}  // namespace megatron::ckpt
