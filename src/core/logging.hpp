// Process-wide logging setup: spdlog to stderr (stdout for training runs) with a rank prefix
// once ranks exist. Library code logs through spdlog directly; only the CLI calls these.
#pragma once

#include <optional>
#include <string_view>

namespace megatron::logging {

// Installs the default logger. `rank` adds "[rank N]" to every line (ranks other than 0 of a
// job). `level_given`: the level came from the command line, which a recipe does not override.
void init(std::string_view level = "info", std::optional<int> rank = std::nullopt,
          bool level_given = false);

// Sends every later log line to stdout, where `megatron run` prints its iteration lines, so that
// `| tee` keeps start-up and training in one stream, in order (as Megatron-LM's print does).
// Commands whose stdout is data (JSON, YAML, token ids) keep logging to stderr.
void log_to_stdout();

// A recipe's logging.level, unless the command line gave one.
void set_recipe_level(std::string_view level);

}  // namespace megatron::logging
