// Text forms of recipes and of the schema: the resolved recipe as annotated YAML
// (`megatron recipe show`), and the schema as JSON Schema or Markdown (`megatron recipe schema`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recipe/compile.hpp"

namespace megatron::recipe {

// Every field in schema order; values that differ from the default carry a comment naming
// the file:line:col or override that set them; derived values follow as comments, then `placed`
// (the planner's, plan::place). The output is itself a valid recipe that compiles to the same
// Recipe.
std::string render_yaml(const CompiledRecipe& compiled, const std::vector<Derivation>& placed = {});

nlohmann::json schema_as_json_schema();
std::string schema_as_markdown();

}  // namespace megatron::recipe
