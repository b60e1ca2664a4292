// `megatron recipe show`, `megatron recipe schema` and `megatron recipe from-megatron`.
#include <iostream>

#include "cli/commands.hpp"
#include "plan/placement.hpp"
#include "recipe/compile.hpp"
#include "recipe/render.hpp"

namespace megatron::cli {

void add_recipe_commands(CLI::App& app, Actions& actions) {
  auto* group = app.add_subcommand("recipe", "Inspect recipes and the recipe schema");
  group->require_subcommand(0, 1);

  struct ShowArgs {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto show_args = std::make_shared<ShowArgs>();
  auto* show = group->add_subcommand(
      "show", "Print the resolved recipe as YAML; values that differ from the default name the "
              "file:line or override that set them");
  show->add_option("recipe", show_args->file, "Recipe YAML file")->required();
  show->add_option("overrides", show_args->overrides, "section.key=value overrides");
  actions.emplace_back(show, [show_args] {
    recipe::CompileOptions options;
    options.overrides = show_args->overrides;
    const recipe::CompiledRecipe compiled = recipe::compile(show_args->file, options);
    std::cout << recipe::render_yaml(compiled, plan::place(compiled).log);
  });

  auto format = std::make_shared<std::string>("json");
  auto* schema = group->add_subcommand(
      "schema", "Print the recipe schema as JSON Schema (for editors) or Markdown (the reference)");
  auto* json_flag = schema->add_flag_callback("--json", [format] { *format = "json"; },
                                              "JSON Schema (default)");
  auto* md_flag = schema->add_flag_callback("--markdown", [format] { *format = "markdown"; },
                                            "Markdown, as in docs/recipes.md");
  json_flag->excludes(md_flag);
  actions.emplace_back(schema, [format] {
    if (*format == "markdown")
      std::cout << recipe::schema_as_markdown();
    else
      std::cout << recipe::schema_as_json_schema().dump(2) << "\n";
  });

  add_from_megatron_command(*group, actions);
}

}  // namespace megatron::cli
