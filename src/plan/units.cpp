#include "plan/units.hpp"

#include <fmt/format.h>

#include <cmath>

namespace megatron::plan {

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / kBytesPerGiB); }

std::string bytes_text(double bytes) {
  // Small models (this project's CPU runs) would read "0.0 GiB" everywhere.
  if (bytes >= kBytesPerGiB || bytes == 0) return gib(bytes);
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.1f} KiB", bytes / 1024.0);
}

std::string flops_text(double flops) {
  if (flops >= 1e15) return fmt::format("{:.1f} PFLOP", flops / 1e15);
  if (flops >= 1e12) return fmt::format("{:.1f} TFLOP", flops / 1e12);
  return fmt::format("{:.1f} GFLOP", flops / 1e9);
}

std::string with_separators(int64_t count) {
  const std::string digits = std::to_string(count < 0 ? -count : count);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return count < 0 ? "-" + out : out;
}

std::string short_count(double count) {
  const double size = std::fabs(count);
  if (size >= 1e12) return fmt::format("{:.1f}T", count / 1e12);
  if (size >= 1e9) return fmt::format("{:.1f}B", count / 1e9);
  if (size >= 1e6) return fmt::format("{:.1f}M", count / 1e6);
  if (size >= 1e3) return fmt::format("{:.1f}K", count / 1e3);
  return fmt::format("{:.0f}", count);
}

}  // namespace megatron::plan
