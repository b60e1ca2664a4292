#include "core/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace megatron::logging {

namespace {
bool level_from_command_line = false;
std::string line_pattern;
}  // namespace

void init(std::string_view level, std::optional<int> rank, bool level_given) {
  level_from_command_line = level_given;
  auto logger = spdlog::stderr_color_mt("megatron");
  std::string pattern = "[%H:%M:%S.%e] [%^%l%$] ";
  if (rank) pattern += "[rank " + std::to_string(*rank) + "] ";
  line_pattern = pattern + "%v";
  logger->set_pattern(line_pattern);
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(logger);
}

void log_to_stdout() {
  const auto previous = spdlog::default_logger();
  auto logger = spdlog::stdout_color_mt("megatron-stdout");
  logger->set_pattern(line_pattern);
  logger->set_level(previous->level());
  spdlog::set_default_logger(logger);
}

void set_recipe_level(std::string_view level) {
  if (!level_from_command_line) spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace megatron::logging
