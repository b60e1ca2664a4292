#include "recipe/compile.hpp"

#include "recipe/checks.hpp"
#include "recipe/entries.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {

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
  std::optional<int64_t> world = options.world_size;
  if (!world && options.world_from_layout) {
    const ParallelSection& p = out.recipe.parallel;
    const std::string_view what =
        "the ranks of the layout (parallel.tensor x pipeline x context x data)";
    world = mul_at(
        where, "parallel.data",
        mul_at(where, "parallel.context",
               mul_at(where, "parallel.pipeline", p.tensor, p.pipeline, what), p.context, what),
        p.data.value_or(1), what);
  }
  out.derived = derive(out.recipe, where, world);
  return out;
}

}  // namespace megatron::recipe
