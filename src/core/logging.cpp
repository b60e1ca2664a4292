#include "core/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace megatron::logging {

void init(std::string_view level, std::optional<int> rank) {
  auto logger = spdlog::stderr_color_mt("megatron");
  std::string pattern = "[%H:%M:%S.%e] [%^%l%$] ";
  if (rank) pattern += "[rank " + std::to_string(*rank) + "] ";
  logger->set_pattern(pattern + "%v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(logger);
}

}  // namespace megatron::logging
