// The spelling of every recipe enum in YAML: canonical names first, then accepted aliases
// (Megatron-LM's names, so existing configs and scripts keep working).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recipe/recipe.hpp"

namespace megatron::recipe {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
  bool canonical = true;  // false for aliases: accepted on input, never printed
};

template <class E>
const std::vector<EnumName<E>>& enum_names();

// Canonical name of `value`.
template <class E>
std::string_view name_of(E value) {
  for (const auto& n : enum_names<E>())
    if (n.canonical && n.value == value) return n.name;
  return "?";
}

// Case-insensitive lookup of a canonical name or an alias.
template <class E>
std::optional<E> parse_enum(std::string_view text) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return out;
  };
  const std::string wanted = lower(text);
  for (const auto& n : enum_names<E>())
    if (lower(n.name) == wanted) return n.value;
  return std::nullopt;
}

template <class E>
std::vector<std::string> canonical_names() {
  std::vector<std::string> out;
  for (const auto& n : enum_names<E>())
    if (n.canonical) out.emplace_back(n.name);
  return out;
}

}  // namespace megatron::recipe
