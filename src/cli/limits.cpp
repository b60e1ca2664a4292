#include "cli/limits.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/parallelism.hpp"
#include "core/printable.hpp"
#include "recipe/schema.hpp"

namespace megatron::cli {
namespace {

// The text as a whole number, or nothing (signs, spaces, fractions and exponents refused).
std::optional<long long> parse_whole(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

CLI::Validator whole_number(long long max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        const auto value = parse_whole(text);
        if (value && *value >= 1 && *value <= max) return "";
        return fmt::format("{} is not a whole number from 1 to {}", printable(text, 40), max);
      },
      fmt::format("1..{}", max));
}

CLI::Validator like_key(const std::string& path) {
  return whole_number(static_cast<long long>(recipe::find_field(path)->maximum.value()));
}

CLI::Validator rank_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto value = parse_whole(text);
        if (value && *value >= 0) return "";
        return fmt::format("{} is not a rank (a whole number from 0)", printable(text, 40));
      },
      "RANK");
}

CLI::Validator whole_number_from_zero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // Every uint64 is a seed: the whole range, no sign.
        unsigned long long value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc() && ptr == end) return "";
        return fmt::format("{} is not a whole number from 0 to {}", printable(text, 40),
                           std::numeric_limits<uint64_t>::max());
      },
      "N");
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc() && ptr == end && std::isfinite(value) && value > 0) return "";
        return fmt::format("{} is not a positive number", printable(text, 40));
      },
      "POSITIVE");
}

CLI::Validator parallelism(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        const auto value = parse_whole(text);
        const int max = max_parallelism();
        if (!value || *value < 1)
          return fmt::format("{} is not a whole number of {} (1 or more)", printable(text, 40), what);
        if (*value > max)
          return fmt::format("{} {} is more than this machine can run: at most {} here (4 per "
                             "core on its {} cores, at least 64, at most 1024)",
                             *value, what, max, usable_cores());
        return "";
      },
      fmt::format("1..{}", max_parallelism()));
}

}  // namespace megatron::cli
