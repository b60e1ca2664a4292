#include "recipe/compile.hpp"

#include <fmt/format.h>

#include "recipe/checks.hpp"
#include "recipe/entries.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

// The ranks the job runs on, and the sentence saying where that number came from.
Derivation world_of(CompiledRecipe& out, const CompileOptions& options, const Locator& where) {
  const Recipe& r = out.recipe;
  if (options.world_size) {
    out.world_size = *options.world_size;
    return {"world size", std::to_string(out.world_size), "ranks in the running job"};
  }
  if (options.world_from_layout) {
    const ParallelSection& p = r.parallel;
    const std::string_view what =
        "the ranks of the layout (parallel.tensor x pipeline x context x data)";
    out.world_size = mul_at(
        where, "parallel.data",
        mul_at(where, "parallel.context",
               mul_at(where, "parallel.pipeline", p.tensor, p.pipeline, what), p.context, what),
        p.data.value_or(1), what);
    return {"world size", std::to_string(out.world_size),
            "parallel.tensor x pipeline x context x data"};
  }
  out.world_size = mul_at(where, "cluster.nodes", r.cluster.nodes, r.cluster.gpus_per_node,
                          "the world size (cluster.nodes x gpus_per_node)");
  return {"world size", std::to_string(out.world_size),
          fmt::format("cluster.nodes {} x cluster.gpus_per_node {}", r.cluster.nodes,
                      r.cluster.gpus_per_node)};
}

}  // namespace

CompiledRecipe compile(const std::filesystem::path& file, const CompileOptions& options) {
  Entries entries = load_recipe_file(file);
  apply_overrides(entries, options.overrides);
  resolve_references(entries);

  CompiledRecipe out;
  out.file = file.string();
  for (const auto& field : fields()) {
    auto it = entries.values.find(field.path);
    if (it != entries.values.end()) {
      field.assign(out.recipe, it->second.value, it->second.origin);
      out.provenance[field.path] = it->second.origin;
    } else if (field.required) {
      Origin where;
      if (auto s = entries.sections.find(field.section); s != entries.sections.end())
        where = s->second;
      else
        where.file = out.file;
      fail_at(where, "missing required key " + field.path + "; add it under " + field.section +
                         ": (" + field.doc + ")");
    }
  }
  const Locator where(out.provenance, out.file);
  check_fields(out.recipe, where);
  Derivation world = world_of(out, options, where);
  out.derived = derive(out.recipe, where);
  // The world comes first in the log: the planner's derivations (data parallelism, micro-batches)
  // start from it.
  out.derived.log.insert(out.derived.log.begin(), std::move(world));
  return out;
}

}  // namespace megatron::recipe
