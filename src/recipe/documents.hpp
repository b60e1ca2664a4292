// The documents of a YAML stream. A recipe, and an override's value, is one document: yaml-cpp
// reads the first and would silently drop a second one after `---`, so the loader asks here.
#pragma once

#include <yaml-cpp/yaml.h>

#include <istream>
#include <optional>

namespace megatron::recipe {

// Where the first document that would be ignored starts (its `---`): a non-empty document
// after the first one. nullopt when the stream holds at most one document with content.
std::optional<YAML::Mark> ignored_document(std::istream& in);

}  // namespace megatron::recipe
