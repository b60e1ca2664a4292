#include "data/dataset_split.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

#include "core/error.hpp"

namespace megatron::data {

const char* split_name(Split split) {
  switch (split) {
    case Split::Train:
      return "train";
    case Split::Valid:
      return "valid";
    case Split::Test:
      return "test";
  }
  return "unknown";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_split(std::string_view split, std::string_view why) {
  throw UserError(
      fmt::format("data split '{}' {}; write up to three non-negative "
                  "train,valid,test proportions such as \"969,30,1\"",
                  split, why));
}

// Python's round() on a float: halves go to the even neighbour. nearbyint would follow the
// current floating-point rounding mode; this does not depend on it.
int64_t round_half_even(double x) {
  const double lower = std::floor(x);
  const double diff = x - lower;
  auto n = static_cast<int64_t>(lower);
  if (diff > 0.5 || (diff == 0.5 && n % 2 != 0)) ++n;
  return n;
}

}  // namespace

std::array<double, 3> parse_split(std::string_view split) {
  std::array<double, 3> parts{0.0, 0.0, 0.0};
  std::size_t count = 0;
  std::string_view rest = split;
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view field = trim(rest.substr(0, comma));
    if (count == parts.size()) bad_split(split, "has more than three parts");
    double value = 0.0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size())
      bad_split(split, fmt::format("has '{}' where a number was expected", field));
    if (!(value >= 0.0) || !std::isfinite(value))
      bad_split(split, fmt::format("has '{}', which is not a non-negative number", field));
    parts[count++] = value;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const double sum = parts[0] + parts[1] + parts[2];
  if (!(sum > 0.0)) bad_split(split, "gives every split zero weight");
  for (double& p : parts) p /= sum;
  return parts;
}

std::array<std::optional<DocumentRange>, 3> split_document_ranges(std::string_view split,
                                                                  int64_t num_documents) {
  const std::array<double, 3> fractions = parse_split(split);
  std::array<std::optional<DocumentRange>, 3> ranges;
  // Cumulative sums in the same order as Megatron, so the floating-point bounds are identical.
  double begin = 0.0;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    const double end = begin + fractions[i];
    if (end > begin) {
      const auto n = static_cast<double>(num_documents);
      ranges[i] = DocumentRange{round_half_even(begin * n), round_half_even(end * n)};
    }
    begin = end;
  }
  return ranges;
}

}  // namespace megatron::data
