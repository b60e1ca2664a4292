// Process-wide logging setup: spdlog to stderr with a rank prefix once ranks exist.
// Library code logs through spdlog directly; only the CLI calls these functions.
#pragma once

#include <optional>
#include <string_view>

namespace megatron::logging {

// Installs the default logger. `rank` adds "[rank N]" to every line (ranks other than 0 of a
// job). `level_given`: the level came from the command line, which a recipe does not override.
void init(std::string_view level = "info", std::optional<int> rank = std::nullopt,
          bool level_given = false);

// A recipe's logging.level, unless the command line gave one.
void set_recipe_level(std::string_view level);

}  // namespace megatron::logging
