// Overflow-checked arithmetic for sizes and counts that come from untrusted input (recipes,
// dataset indices, checkpoints, configs): an overflow is a UserError naming what was computed.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron {

// a * b, or a UserError "<what> overflows: a x b does not fit <type>" (what names the
// quantity, e.g. "recipe key model.hidden_size: parameter count").
template <std::integral T>
T checked_mul(T a, T b, std::string_view what) {
  T out;
  if (__builtin_mul_overflow(a, b, &out))
    throw UserError(fmt::format("{} overflows: {} x {} is too large", what, a, b));
  return out;
}

template <std::integral T>
T checked_add(T a, T b, std::string_view what) {
  T out;
  if (__builtin_add_overflow(a, b, &out))
    throw UserError(fmt::format("{} overflows: {} + {} is too large", what, a, b));
  return out;
}

template <std::integral T>
T checked_sub(T a, T b, std::string_view what) {
  T out;
  if (__builtin_sub_overflow(a, b, &out))
    throw UserError(fmt::format("{} overflows: {} - {} is out of range", what, a, b));
  return out;
}

// a / b for a divisor that came from input: zero is a UserError, not SIGFPE.
template <std::integral T>
T checked_div(T a, T b, std::string_view what) {
  if (b == 0) throw UserError(fmt::format("{}: division by zero", what));
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1))
      throw UserError(fmt::format("{} overflows: {} / -1", what, a));
  return a / b;
}

// Converts between integer types, or a UserError when the value does not fit.
template <std::integral To, std::integral From>
To checked_cast(From v, std::string_view what) {
  if (!std::in_range<To>(v))
    throw UserError(fmt::format("{}: {} is out of range", what, v));
  return static_cast<To>(v);
}

}  // namespace megatron
