// The recipe schema: every section and field, its type, range, default and documentation,
// bound to its member of Recipe. The single source for parsing, `recipe show` and the docs.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "recipe/origin.hpp"
#include "recipe/recipe.hpp"

namespace megatron::recipe {

enum class ValueKind { Integer, Number, Boolean, String, Choice, IntegerList, NumberList, StringList, TaskList };

struct SectionSpec {
  std::string name;  // "model"
  std::string doc;
};

struct FieldSpec {
  std::string path;     // "model.hidden_size"
  std::string section;  // "model"
  std::string key;      // "hidden_size"
  ValueKind kind = ValueKind::String;
  std::string doc;
  bool required = false;
  bool optional = false;                // may be unset (null): derived or unused when absent
  std::optional<double> minimum;        // inclusive, for numbers and list elements
  std::optional<double> maximum;        // inclusive
  // The maximum is a ceiling far above any real job rather than a property of the value: it
  // keeps every size, product and loop derived from the value exact and short.
  bool maximum_is_ceiling = false;
  bool minimum_exclusive = false;
  std::vector<std::string> choices;     // canonical names, for ValueKind::Choice
  std::string default_note;             // how an unset optional value is derived

  // Parses `node` (already ${}-resolved) into the recipe; throws UserError naming `origin`.
  std::function<void(const FieldSpec&, Recipe&, const YAML::Node&, const Origin&)> parse_into;
  // The value as YAML flow text ("768", "[a, b]", "cosine"); nullopt when unset.
  std::function<std::optional<std::string>(const Recipe&)> render;

  void assign(Recipe& recipe, const YAML::Node& node, const Origin& origin) const {
    parse_into(*this, recipe, node, origin);
  }
  // "an integer >= 1", "one of gpt, bert, t5", ...
  std::string type_description() const;
};

const std::vector<SectionSpec>& sections();
const std::vector<FieldSpec>& fields();

// nullptr when `path` names no field.
const FieldSpec* find_field(const std::string& path);
std::vector<std::string> field_keys_of(const std::string& section);
std::vector<std::string> section_names();
std::vector<std::string> field_paths();

// "file:line:col: message" as a UserError.
[[noreturn]] void fail_at(const Origin& origin, const std::string& message);

}  // namespace megatron::recipe
