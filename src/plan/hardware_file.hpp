// Hardware profiles as JSON files: what `megatron plan --calibrate` writes and what
// `--hardware FILE.json` (or cluster.hardware) reads. Format: docs/plan.md, "Profile files".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/hardware.hpp"

namespace megatron::plan {

nlohmann::json hardware_to_json(const HardwareProfile& profile);
// Validates everything (types, ranges, grid shapes); throws UserError naming `origin` and the
// offending key.
HardwareProfile hardware_from_json(const nlohmann::json& json, const std::string& origin);

// Reads and validates a profile file (at most 16 MiB); errors name the path.
HardwareProfile read_hardware_file(const std::string& path);
// Writes to a temporary file beside `path`, then renames it over `path`: an interrupted write
// never leaves a half-written profile.
void write_hardware_file(const HardwareProfile& profile, const std::string& path);

}  // namespace megatron::plan
