// The recipe before typing: dotted path -> YAML value + where it was set. Loading a file
// (following base:), applying overrides and resolving ${...} all work on this form.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "recipe/origin.hpp"

namespace megatron::recipe {

struct Entry {
  YAML::Node value;
  Origin origin;
};

struct Entries {
  std::map<std::string, Entry> values;     // "model.hidden_size" -> value
  std::map<std::string, Origin> sections;  // "model" -> where the section key stands
};

// Loads `file` and, first, every recipe named by its `base:` key (relative to the file,
// recursively); later layers replace earlier ones key by key. `display` is how the user
// named the file, used in messages. Rejects unknown sections and keys, duplicates and cycles.
Entries load_recipe_file(const std::filesystem::path& file);

// Applies "section.key=value" overrides in order (the value is parsed as YAML).
void apply_overrides(Entries& entries, const std::vector<std::string>& overrides);

// Replaces ${section.key} references in string values by the referenced value (whole-value
// references keep the referenced type, e.g. a number or a list).
void resolve_references(Entries& entries);

}  // namespace megatron::recipe
