// Process-wide logging setup: spdlog to stderr with a rank prefix once ranks exist.
// Library code logs through spdlog directly; only the CLI calls these functions.
#pragma once

#include <optional>
#include <string_view>

namespace megatron::logging {

// Installs the default logger. `rank` adds "[rank N]" to every line when the job has ranks.
void init(std::string_view level = "info", std::optional<int> rank = std::nullopt);

}  // namespace megatron::logging
