#include "recipe/codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::recipe {

[[noreturn]] void fail_at(const Origin& origin, const std::string& message) {
  throw UserError(origin.known() ? origin.describe() + ": " + message : message);
}

namespace codec {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void expect_scalar(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  if (!node.IsScalar())
    fail_at(origin, spec.path + ": expected " + spec.type_description() + ", got " +
                        describe_node(node));
}

}  // namespace

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return fmt::format("'{}'", printable(node.Scalar()));
}

std::string quote_scalar(const std::string& text) {
  YAML::Emitter out;
  out << text;
  return out.c_str();
}

std::string format_number(double value) {
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    // Keep "1.0" a number on re-reading (an integer field would not accept it anyway).
    return fmt::format("{:.1f}", value);
  }
  return fmt::format("{}", value);
}

std::string bound_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e18) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

namespace {

void check_range(double value, const std::string& text, const FieldSpec& spec,
                 const Origin& origin) {
  if (spec.minimum) {
    const bool below = spec.minimum_exclusive ? value <= *spec.minimum : value < *spec.minimum;
    if (below)
      fail_at(origin, spec.path + ": " + text + " is out of range: it must be " +
                          (spec.minimum_exclusive ? "> " : ">= ") + bound_text(*spec.minimum));
  }
  if (spec.maximum && value > *spec.maximum)
    fail_at(origin, spec.path + ": " + text +
                        " is out of range: it must be <= " + bound_text(*spec.maximum) +
                        (spec.maximum_is_ceiling
                             ? ", a ceiling far above any real job that keeps the compiler's and "
                               "planner's arithmetic exact"
                             : ""));
}

}  // namespace

void check_range(double value, const FieldSpec& spec, const Origin& origin) {
  check_range(value, fmt::format("{}", value), spec, origin);
}

int64_t parse_integer(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  expect_scalar(node, spec, origin);
  std::string text = node.Scalar();
  std::erase(text, '_');  // 1_000_000 reads as in Python
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range)
    fail_at(origin, spec.path + ": " + printable(node.Scalar()) +
                        " does not fit in a 64-bit integer; expected " + spec.type_description());
  if (ec != std::errc() || ptr != end || text.empty()) {
    // Accept whole numbers written as 2e9 or 4096.0; reject 0.5.
    double as_double = 0;
    auto [dptr, dec] = std::from_chars(text.data(), end, as_double);
    if (dec == std::errc() && dptr == end && as_double == std::floor(as_double) &&
        std::abs(as_double) < 9.0e18) {
      value = static_cast<int64_t>(as_double);
    } else {
      fail_at(origin, spec.path + ": expected " + spec.type_description() + ", got " +
                          describe_node(node));
    }
  }
  // Compared as a double (bounds are far below 2^53) but shown as the exact integer.
  check_range(static_cast<double>(value), std::to_string(value), spec, origin);
  return value;
}

double parse_number(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  expect_scalar(node, spec, origin);
  const std::string& text = node.Scalar();
  double value = 0;
  const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || text.empty() || !std::isfinite(value))
    fail_at(origin, spec.path + ": expected " + spec.type_description() + ", got " +
                        describe_node(node));
  check_range(value, spec, origin);
  return value;
}

bool parse_boolean(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  expect_scalar(node, spec, origin);
  const std::string text = lower(node.Scalar());
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  fail_at(origin, spec.path + ": expected true or false, got " + describe_node(node));
}

std::string parse_string(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  if (node.IsNull())
    fail_at(origin, spec.path + ": expected " + spec.type_description() + ", got null");
  expect_scalar(node, spec, origin);
  return node.Scalar();
}

}  // namespace codec
}  // namespace megatron::recipe
