// Conversion between YAML nodes and the C++ types of Recipe members, with the type and range
// checks of the schema. Internal to src/recipe/ (schema.cpp binds fields through it).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/printable.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/schema.hpp"
#include "recipe/suggest.hpp"

namespace megatron::recipe::codec {

std::string describe_node(const YAML::Node& node);  // for "got ..." in messages
std::string quote_scalar(const std::string& text);   // YAML-safe flow scalar
std::string format_number(double value);             // shortest round-trip text
std::string bound_text(double bound);                // "100000", not "1e+05"; "0.5"

int64_t parse_integer(const YAML::Node& node, const FieldSpec& spec, const Origin& origin);
double parse_number(const YAML::Node& node, const FieldSpec& spec, const Origin& origin);
bool parse_boolean(const YAML::Node& node, const FieldSpec& spec, const Origin& origin);
std::string parse_string(const YAML::Node& node, const FieldSpec& spec, const Origin& origin);
void check_range(double value, const FieldSpec& spec, const Origin& origin);

template <class T>
struct Codec;

template <>
struct Codec<int64_t> {
  static constexpr ValueKind kind = ValueKind::Integer;
  static int64_t parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    return parse_integer(n, s, o);
  }
  static std::string render(int64_t v) { return std::to_string(v); }
};

template <>
struct Codec<double> {
  static constexpr ValueKind kind = ValueKind::Number;
  static double parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    return parse_number(n, s, o);
  }
  static std::string render(double v) { return format_number(v); }
};

template <>
struct Codec<bool> {
  static constexpr ValueKind kind = ValueKind::Boolean;
  static bool parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    return parse_boolean(n, s, o);
  }
  static std::string render(bool v) { return v ? "true" : "false"; }
};

template <>
struct Codec<std::string> {
  static constexpr ValueKind kind = ValueKind::String;
  static std::string parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    return parse_string(n, s, o);
  }
  static std::string render(const std::string& v) { return quote_scalar(v); }
};

template <class E>
  requires std::is_enum_v<E>
struct Codec<E> {
  static constexpr ValueKind kind = ValueKind::Choice;
  static E parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    const std::string text = parse_string(n, s, o);
    if (auto value = parse_enum<E>(text)) return *value;
    std::string list;
    for (const auto& c : s.choices) list += (list.empty() ? "" : ", ") + c;
    fail_at(o, s.path + ": '" + printable(text) + "' is not one of " + list +
                   did_you_mean_choice(text, s));
  }
  static std::string render(E v) { return std::string(name_of(v)); }
  static std::string did_you_mean_choice(const std::string& text, const FieldSpec& s) {
    return did_you_mean(text, s.choices);
  }
};

template <class T>
struct Codec<std::vector<T>> {
  static constexpr ValueKind kind = Codec<T>::kind == ValueKind::Integer  ? ValueKind::IntegerList
                                    : Codec<T>::kind == ValueKind::Number ? ValueKind::NumberList
                                                                          : ValueKind::StringList;
  static std::vector<T> parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    std::vector<T> out;
    if (n.IsNull()) return out;
    if (n.IsScalar()) {  // a single value stands for a one-element list
      out.push_back(Codec<T>::parse(n, s, o));
      return out;
    }
    if (!n.IsSequence())
      fail_at(o, s.path + ": expected " + s.type_description() + ", got " + describe_node(n));
    for (const auto& item : n) {
      if (!item.IsScalar())
        fail_at(o, s.path + ": expected " + s.type_description() + ", got a nested " +
                       describe_node(item));
      out.push_back(Codec<T>::parse(item, s, o));
    }
    return out;
  }
  static std::string render(const std::vector<T>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Codec<T>::render(v[i]);
    return out + "]";
  }
};

template <class T>
struct Codec<std::optional<T>> {
  static constexpr ValueKind kind = Codec<T>::kind;
  static std::optional<T> parse(const YAML::Node& n, const FieldSpec& s, const Origin& o) {
    if (n.IsNull()) return std::nullopt;  // `null` unsets a value a base recipe gave
    return Codec<T>::parse(n, s, o);
  }
};

}  // namespace megatron::recipe::codec
