// The recipe compiler's entry point: YAML file + overrides -> validated Recipe + derived values.
// Order of precedence (lowest first): schema defaults, base: files (deepest first), the file,
// command-line overrides (in order); ${...} references resolve after all of them are merged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "recipe/derived.hpp"
#include "recipe/origin.hpp"
#include "recipe/recipe.hpp"

namespace megatron::recipe {

struct CompileOptions {
  std::vector<std::string> overrides;  // "training.lr=3e-4", "parallel.tensor=2", ...
  // The real number of ranks when a job is running; when unset the world is
  // cluster.nodes x cluster.gpus_per_node.
  std::optional<int64_t> world_size;
  // Without world_size: the world the layout itself asks for, tensor x pipeline x context x
  // data (data 1 when unset), instead of the cluster's.
  bool world_from_layout = false;
};

struct CompiledRecipe {
  Recipe recipe;
  Derived derived;
  // The ranks the job runs on: the running job's, the layout's, or cluster.nodes x
  // gpus_per_node (CompileOptions). The planner places the layout on them.
  int64_t world_size = 1;
  Provenance provenance;  // only values set by a file or an override appear here
  std::string file;       // the top-level recipe file as given
};

// Throws UserError with "file:line:col: message" for any invalid input.
CompiledRecipe compile(const std::filesystem::path& file, const CompileOptions& options = {});

}  // namespace megatron::recipe
